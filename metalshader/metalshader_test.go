package metalshader

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// definedKernels returns the kernel names a library's source defines:
// direct [[kernel]] functions plus the expansions of the ops macros.
func definedKernels(src string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\[\[kernel\]\] void (\w+)\(`).FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	macro := regexp.MustCompile(`(?m)^CHOREO_(FILL|COPY|FLOAT_OPS|INT_OPS)\((\w+),`)
	for _, m := range macro.FindAllStringSubmatch(src, -1) {
		switch m[1] {
		case "FILL":
			names = append(names, "fill_"+m[2])
		case "COPY":
			names = append(names, "copy_"+m[2])
		default:
			names = append(names, "arange_"+m[2], "add_"+m[2], "scale_"+m[2])
		}
	}
	sort.Strings(names)
	return names
}

func TestEveryExportedKernelIsDefinedAndViceVersa(t *testing.T) {
	for _, l := range Libraries() {
		got := definedKernels(l.Source)
		want := slices.Clone(l.Kernels)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("library %s: source defines %v, package exports %v", l.Name, got, want)
		}
	}
	all := Kernels()
	if len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("duplicate kernel names: %v", all)
	}
}

func TestOpKernelCoversEveryDType(t *testing.T) {
	for _, op := range Ops {
		for _, dt := range gpu.DTypes {
			name, ok := OpKernel(op, dt)
			wantOK := dt != gpu.Float64 || op == Fill || op == Copy
			if ok != wantOK {
				t.Errorf("OpKernel(%s, %s) ok = %v, want %v", op, dt, ok, wantOK)
				continue
			}
			if !ok {
				continue
			}
			if _, err := Source(name); err != nil {
				t.Errorf("OpKernel(%s, %s) = %q, not in any library: %v", op, dt, name, err)
			}
		}
	}
	if _, ok := OpKernel(Add, gpu.Invalid); ok {
		t.Error("OpKernel accepted the invalid dtype")
	}
	if _, ok := OpKernel(Op("mul"), gpu.Float32); ok {
		t.Error("OpKernel accepted an unknown op")
	}
}

func TestSourceByName(t *testing.T) {
	for _, k := range []string{FenceUpdate, FenceWait, InputCoherent} {
		src, err := Source(k)
		if err != nil || !strings.Contains(src, "void "+k+"(") {
			t.Errorf("Source(%q): err %v, defines it: %v", k, err, strings.Contains(src, "void "+k+"("))
		}
		l, _ := LibraryOf(k)
		if l.Name != FenceLibrary || l.LanguageMajor != 3 || l.LanguageMinor != 2 {
			t.Errorf("LibraryOf(%q) = %s %d.%d, want fence 3.2", k, l.Name, l.LanguageMajor, l.LanguageMinor)
		}
	}
	if _, err := Source("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "metalshader: ") {
		t.Errorf("Source(unknown) error = %v, want a metalshader error", err)
	}
}

// The Go and MSL sides must agree on the parameter block, the binding
// indices and the status codes.
func TestBindingContract(t *testing.T) {
	if ParamsSize != 24 {
		t.Errorf("ParamsSize = %d, want 24", ParamsSize)
	}
	params := regexp.MustCompile(`(?s)struct Params \{\s*ulong a;\s*ulong b;\s*uint n;\s*uint pad;\s*\};`)
	paramsAt := regexp.MustCompile(`Params& p \[\[buffer\((\d+)\)\]\]`)
	statusAt := regexp.MustCompile(`\* status \[\[buffer\((\d+)\)\]\]`)
	for _, l := range Libraries() {
		if !params.MatchString(l.Source) {
			t.Errorf("library %s: no struct Params matching metalshader.Params", l.Name)
		}
		check := func(re *regexp.Regexp, want int, what string) {
			ms := re.FindAllStringSubmatch(l.Source, -1)
			if len(ms) == 0 {
				t.Errorf("library %s: no %s binding", l.Name, what)
			}
			for _, m := range ms {
				if got, _ := strconv.Atoi(m[1]); got != want {
					t.Errorf("library %s: %s bound at buffer(%d), want %d", l.Name, what, got, want)
				}
			}
		}
		check(paramsAt, BindParams, "params")
		check(statusAt, BindStatus, "status")
	}
	for _, cmd := range []int{0, 1, 7, 1 << 20} {
		s := WaitTimeoutStatus(cmd)
		if code, got := ParseStatus(s); code != StatusWaitTimeout || got != cmd || s == StatusRunning {
			t.Errorf("ParseStatus(WaitTimeoutStatus(%d)) = %d, %d", cmd, code, got)
		}
	}
}

// The fence kernels must keep their safety properties: no loop without a
// bound, a monotonic update, a system-scope fence.
func TestFenceKernelsAreBoundedAndMonotonic(t *testing.T) {
	code := stripComments(fenceSource)
	if strings.Contains(code, "while") || regexp.MustCompile(`for\s*\(\s*[^;]*;\s*;`).MatchString(code) {
		t.Error("fence.metal has a loop without a bound")
	}
	wait := kernelBody(t, code, FenceWait)
	if !strings.Contains(wait, "i < p.a") || !strings.Contains(wait, "status[0] = uint(p.b);") {
		t.Errorf("fence_wait is not bounded by p.a polls with a timeout status:\n%s", wait)
	}
	update := kernelBody(t, code, FenceUpdate)
	if !regexp.MustCompile(`if \(cur < p\.n\) \{\s*word\[0\] = p\.n;`).MatchString(update) {
		t.Errorf("fence_update does not store only a larger value:\n%s", update)
	}
	for _, k := range []string{FenceUpdate, FenceWait, InputCoherent} {
		if !strings.Contains(kernelBody(t, code, k), "system_fence()") {
			t.Errorf("%s has no system-scope fence", k)
		}
	}
}

func TestSourcesAreBalanced(t *testing.T) {
	for _, l := range Libraries() {
		code := stripComments(l.Source)
		var stack []rune
		pair := map[rune]rune{')': '(', ']': '[', '}': '{'}
		for i, r := range code {
			switch r {
			case '(', '[', '{':
				stack = append(stack, r)
			case ')', ']', '}':
				if len(stack) == 0 || stack[len(stack)-1] != pair[r] {
					t.Fatalf("library %s: unbalanced %q at byte %d", l.Name, r, i)
				}
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) != 0 {
			t.Errorf("library %s: %d unclosed brackets", l.Name, len(stack))
		}
	}
}

// stripComments removes // line comments (the sources use no /* */).
func stripComments(src string) string {
	return regexp.MustCompile(`//[^\n]*`).ReplaceAllString(src, "")
}

// kernelBody returns the text of kernel name from its declaration to the
// closing brace of its body.
func kernelBody(t *testing.T, code, name string) string {
	t.Helper()
	i := strings.Index(code, "void "+name+"(")
	if i < 0 {
		t.Fatalf("kernel %s not found", name)
	}
	depth, started := 0, false
	for j := i; j < len(code); j++ {
		switch code[j] {
		case '{':
			depth++
			started = true
		case '}':
			depth--
			if started && depth == 0 {
				return code[i : j+1]
			}
		}
	}
	t.Fatalf("kernel %s has no closed body", name)
	return ""
}
