package metalshader

import (
	_ "embed"
	"fmt"
	"sort"
)

//go:embed fence.metal
var fenceSource string

//go:embed ops.metal
var opsSource string

// Library is one MSL source file, compiled as a unit into one MTLLibrary.
// Kernels lists the kernel functions it defines (the names given to
// newFunctionWithName). LanguageMajor/LanguageMinor is the MSL version the
// source needs (0.0: the compiler's default); the backend passes it as
// MTLCompileOptions.languageVersion.
type Library struct {
	Name          string
	Source        string
	LanguageMajor int
	LanguageMinor int
	Kernels       []string
}

// FenceLibrary and OpsLibrary name the two libraries.
const (
	FenceLibrary = "fence"
	OpsLibrary   = "ops"
)

// Libraries returns every library, the fence library first. The slices are
// fresh copies; callers may keep or change them.
func Libraries() []Library {
	return []Library{
		{Name: FenceLibrary, Source: fenceSource, LanguageMajor: 3, LanguageMinor: 2,
			Kernels: []string{FenceUpdate, FenceWait, InputCoherent}},
		{Name: OpsLibrary, Source: opsSource, Kernels: opsKernels()},
	}
}

// LibraryOf returns the library that defines the named kernel.
func LibraryOf(kernel string) (Library, error) {
	for _, l := range Libraries() {
		for _, k := range l.Kernels {
			if k == kernel {
				return l, nil
			}
		}
	}
	return Library{}, fmt.Errorf("metalshader: no kernel named %q", kernel)
}

// Source returns the MSL source that defines the named kernel (the whole
// library: kernels share helpers and are compiled together).
func Source(kernel string) (string, error) {
	l, err := LibraryOf(kernel)
	if err != nil {
		return "", err
	}
	return l.Source, nil
}

// Kernels lists every kernel name of every library, sorted.
func Kernels() []string {
	var names []string
	for _, l := range Libraries() {
		names = append(names, l.Kernels...)
	}
	sort.Strings(names)
	return names
}
