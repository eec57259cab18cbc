package darwincheck

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Target platform of every check: an Apple-silicon Mac.
const (
	targetGOOS   = "darwin"
	targetGOARCH = "arm64"
)

// darwinContext is build.Default retargeted to darwin/arm64 with cgo on.
// Its file-system hooks stay nil, so go/build may run `go list` for
// module packages (it passes GOOS, GOARCH and CGO_ENABLED along).
func darwinContext() build.Context {
	ctxt := build.Default
	ctxt.GOOS = targetGOOS
	ctxt.GOARCH = targetGOARCH
	ctxt.CgoEnabled = true
	return ctxt
}

// goListEnv is the environment for our own `go list` runs.
func goListEnv() []string {
	return append(os.Environ(), "GOOS="+targetGOOS, "GOARCH="+targetGOARCH, "CGO_ENABLED=1")
}

// ExpandPatterns turns package patterns (as the go command takes them:
// "./gpu/metal", "./...", an import path) into package directories, the
// way a darwin/arm64 cgo build sees them. It runs `go list` in dir.
func ExpandPatterns(dir string, patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, errors.New("darwincheck: no packages given")
	}
	args := append([]string{"list", "-e", "-f", "{{.Dir}}\t{{if .Error}}{{.Error}}{{end}}", "--"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = goListEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("darwincheck: go list %v: %v\n%s", patterns, err, stderr.String())
	}
	var dirs, errs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		d, e, _ := strings.Cut(sc.Text(), "\t")
		if e != "" {
			errs = append(errs, e)
			continue
		}
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("darwincheck: go list: %s", strings.Join(errs, "; "))
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("darwincheck: no packages match %v", patterns)
	}
	return dirs, nil
}

// importPathOf derives the import path of the package in dir from the
// nearest go.mod above it (module path + relative directory). Outside any
// module it falls back to the directory's base name.
func importPathOf(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if mod := modulePath(filepath.Join(d, "go.mod")); mod != "" {
			rel, err := filepath.Rel(d, dir)
			if err != nil || rel == "." {
				return mod
			}
			return mod + "/" + filepath.ToSlash(rel)
		}
		if filepath.Dir(d) == d {
			return filepath.Base(dir)
		}
	}
}

// modulePath reads the module line of a go.mod file ("" if none).
func modulePath(gomod string) string {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
