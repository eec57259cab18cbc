package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/choreo-gpu/choreo/"

// layer is each package's place in the import graph (see doc.go).
var layer = map[string]int{
	"internal/errs": 0, "internal/awake": 0, "internal/gate": 0, "internal/spin": 0, "gpu/half": 0, "internal/layers": 0, "internal/pool": 0,
	"internal/localrank": 0, "wire": 0, "trace": 0, "metrics": 0,
	"gpu": 1, "launch": 1,
	"metalshader": 2, "gpu/cuda/nccl": 2,
	"gpu/sim": 3, "gpu/cuda": 3, "gpu/metal": 3, "gpu/gputest": 3, "internal/darwincheck": 3,
	"actors": 4, "gpu/backends": 4,
	"streams": 5, "actors/remoting": 5,
	"fence":              6,
	"array":              7,
	"collectives/reduce": 8, "collectives/transport": 8,
	"collectives/transport/msg": 9, "collectives/transport/mesh": 9,
	"collectives/algo": 10, "collectives/transport/transporttest": 10, "collectives/transport/tcp": 10, "collectives/transport/shm": 10,
	"collectives":         11,
	"collectives/cluster": 12, "choreotest": 12,
	"internal/testenv":   13,
	"bench/internal/rig": 13,
}

// place is a package's layer: the table's, else the top for every cmd/
// program, benchmark and the integration tests.
func place(pkg string) (int, bool) {
	if l, ok := layer[pkg]; ok {
		return l, true
	}
	if strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "bench/") || pkg == "test" {
		return 14, true
	}
	return 0, false
}

// TestImportsPointDown parses every non-test Go file of the module (all
// build tags alike) and checks each import of a module package against
// the layers.
func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		from, ok := place(pkg)
		if !ok {
			t.Errorf("%s: package %s has no layer: place it in internal/layers (doc.go and layer)", path, pkg)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			dep := strings.TrimPrefix(p, module)
			to, ok := place(dep)
			if !ok {
				t.Errorf("%s imports %s, which has no layer", path, dep)
				continue
			}
			checked++
			if to >= from {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", rel+"/"+filepath.Base(path), from, dep, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no import checked: the walk found no code")
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("root %s is not the module: %v", root, err)
	}
}

// inProcess is what a program whose ranks all live in one process imports
// (actors.NewRuntime, collectives.Local, streams, fences, arrays, the
// backends): none of it may reach gRPC, which only the control plane
// between processes needs (actors/remoting, through collectives/cluster).
var inProcess = []string{"actors", "streams", "fence", "array", "collectives", "gpu/backends"}

// heavy is the module path prefix the in-process packages must not reach.
const heavy = "google.golang.org/grpc"

// TestInProcessLinksNoGRPC asks the go command for every dependency of the
// in-process packages (and of the remoting and cluster packages, which
// must reach gRPC: the check itself works) and fails where an in-process
// package reaches a gRPC package, naming it.
func TestInProcessLinksNoGRPC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list dependencies with: %v", err)
	}
	pkgs := append([]string{"actors/remoting", "collectives/cluster"}, inProcess...)
	args := []string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}
	for _, p := range pkgs {
		args = append(args, module+p)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	reaches := map[string]string{} // package to the first gRPC package it reaches
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		reaches[pkg] = ""
		for _, d := range fields[1:] {
			if d == heavy || strings.HasPrefix(d, heavy+"/") {
				reaches[pkg] = d
				break
			}
		}
	}
	for _, p := range []string{"actors/remoting", "collectives/cluster"} {
		if d, ok := reaches[p]; !ok || d == "" {
			t.Errorf("%s reaches no %s package (listed: %v): the check cannot see gRPC", p, heavy, ok)
		}
	}
	for _, p := range inProcess {
		d, ok := reaches[p]
		switch {
		case !ok:
			t.Errorf("go list did not list %s", p)
		case d != "":
			t.Errorf("%s reaches %s: in-process programs must link no gRPC (remoting belongs in actors/remoting, Join in collectives/cluster)", p, d)
		}
	}
}
