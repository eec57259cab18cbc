package darwincheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// One Checker for the whole test binary: it caches std and darwinkit, so
// the tests after the first cost well under a second each.
var (
	sharedOnce    sync.Once
	sharedChecker *Checker
)

func checker(t *testing.T) *Checker {
	t.Helper()
	sharedOnce.Do(func() {
		sharedChecker = NewChecker()
		sharedChecker.Tests = true
	})
	return sharedChecker
}

// want is an expected diagnostic, from a "// want kind "text"" comment.
type want struct {
	line int
	kind Kind
	text string
}

func readWants(t *testing.T, file string) []want {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	re := regexp.MustCompile(`// want (\w+) "([^"]*)"`)
	var ws []want
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			ws = append(ws, want{line: line, kind: Kind(m[1]), text: m[2]})
		}
	}
	return ws
}

// match checks that every want has a diagnostic on its line with its kind
// and text, and that no diagnostic is unexpected.
func match(t *testing.T, ds []Diagnostic, ws []want) {
	t.Helper()
	used := make([]bool, len(ds))
	for _, w := range ws {
		found := false
		for i, d := range ds {
			if d.Pos.Line == w.line && d.Kind == w.kind && strings.Contains(d.Msg, w.text) {
				used[i], found = true, true
			}
		}
		if !found {
			t.Errorf("line %d: no %s diagnostic containing %q", w.line, w.kind, w.text)
		}
	}
	for i, d := range ds {
		if !used[i] {
			t.Errorf("unexpected diagnostic: %s", d)
		}
	}
}

func TestBadFixtureEveryMistakeIsCaught(t *testing.T) {
	c := checker(t)
	ds, err := c.Check("testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	match(t, ds, readWants(t, "testdata/bad/bad_darwin.go"))
	kinds := map[Kind]int{}
	for _, d := range ds {
		kinds[d.Kind]++
	}
	if kinds[KindType] < 3 || kinds[KindTrap] < 2 || kinds[KindSel] < 2 {
		t.Errorf("diagnostic kinds %v: want >= 3 type, 2 trap, 2 sel", kinds)
	}
}

func TestAllowListSilencesASelector(t *testing.T) {
	c := checker(t)
	c.AllowSelectors = []string{"setBufer:offset:atIndex:"}
	defer func() { c.AllowSelectors = nil }()
	ds, err := c.Check("testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Kind == KindSel && strings.Contains(d.Msg, "setBufer") {
			t.Errorf("allowed selector still reported: %s", d)
		}
	}
	if len(ds) == 0 {
		t.Error("allow-listing one selector silenced everything")
	}
}

func TestGoodFixtureIsClean(t *testing.T) {
	ds, err := checker(t).Check("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		t.Errorf("unexpected: %s", d)
	}
}

// The traps are derived from darwinkit's source: the known ones must be
// found, and plain methods must not be.
func TestTrapsAreFoundStructurally(t *testing.T) {
	c := checker(t)
	const metalPkg = DarwinkitPrefix + "macos/metal"
	if err := c.LoadKit(metalPkg, "."); err != nil {
		t.Fatal(err)
	}
	traps := c.Traps(metalPkg)
	for _, name := range []string{
		"metal.ComputeCommandEncoderObject.SetComputePipelineState",
		"metal.ComputeCommandEncoderObject.SetBufferOffsetAtIndex_",
		"metal.CommandBufferObject.EncodeSignalEventValue",
		"metal.CommandBufferObject.EncodeWaitForEventValue",
		"metal.DeviceObject.NewComputePipelineStateWithFunctionError",
	} {
		if !slices.Contains(traps, name) {
			t.Errorf("trap %s not found", name)
		}
	}
	for _, name := range []string{
		"metal.DeviceObject.NewBufferWithLengthOptions",
		"metal.ComputeCommandEncoderObject.SetBytesLengthAtIndex",
		"metal.ComputeCommandEncoderObject.SetBufferOffsetAtIndex",
		"metal.SharedEventObject.NotifyListenerAtValueBlock",
		"metal.ComputePipelineDescriptor.SetComputeFunction",
	} {
		if slices.Contains(traps, name) {
			t.Errorf("%s reported as a trap", name)
		}
	}
	if len(traps) < 100 {
		t.Errorf("only %d traps in %s; darwinkit v0.5.0 has 181", len(traps), metalPkg)
	}
}

// The real packages this checker exists for must be clean.
func TestChoreoMetalPackagesAreClean(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := ExpandPatterns(root, []string{"./gpu/metal", "./metalshader"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := checker(t).Check(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		t.Errorf("%s", d)
	}
}
