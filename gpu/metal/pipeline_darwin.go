//go:build darwin

package metal

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/progrium/darwinkit/macos/foundation"
	"github.com/progrium/darwinkit/macos/metal"
	"github.com/progrium/darwinkit/objc"

	"github.com/choreo-gpu/choreo/metalshader"
)

// pipeline is a compiled kernel: its compute pipeline state (+1, owned by
// the cache) and its threadgroup size limit.
type pipeline struct {
	pso        metal.ComputePipelineStateObject
	maxThreads uint
}

// pipelines compiles metalshader libraries (newLibraryWithSource) and
// kernels (newComputePipelineStateWithFunction) on first use and keeps
// them until release. Safe for concurrent use.
type pipelines struct {
	dev metal.DeviceObject

	mu   sync.Mutex
	libs map[string]metal.LibraryObject // +1 each
	psos map[string]pipeline
}

func newPipelines(dev metal.DeviceObject) *pipelines {
	return &pipelines{dev: dev, libs: map[string]metal.LibraryObject{}, psos: map[string]pipeline{}}
}

// compile compiles the named library if it is not compiled yet.
func (p *pipelines) compile(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range metalshader.Libraries() {
		if l.Name == name {
			_, err := p.library(l)
			return err
		}
	}
	return fmt.Errorf("metal: newLibrary: no metalshader library %q", name)
}

// get returns the pipeline of a metalshader kernel, compiling it (and its
// library) on first use.
func (p *pipelines) get(kernel string) (pipeline, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl, ok := p.psos[kernel]; ok {
		return pl, nil
	}
	l, err := metalshader.LibraryOf(kernel)
	if err != nil {
		return pipeline{}, fmt.Errorf("metal: pipeline: %w", err)
	}
	lib, err := p.library(l)
	if err != nil {
		return pipeline{}, err
	}
	var pl pipeline
	objc.WithAutoreleasePool(func() {
		fn := lib.NewFunctionWithName(kernel) // +1
		if fn.IsNil() {
			err = fmt.Errorf("metal: newFunctionWithName %q: not in library %s", kernel, l.Name)
			return
		}
		defer fn.Release()
		var e foundation.Error
		// newComputePipelineStateWithFunction:error: is a darwinkit trap
		// (it wraps FunctionObject as a protocol and panics): send it.
		pso := objc.Call[metal.ComputePipelineStateObject](p.dev,
			objc.Sel("newComputePipelineStateWithFunction:error:"), fn, unsafe.Pointer(&e))
		if pso.IsNil() {
			err = fmt.Errorf("metal: newComputePipelineState %q: %s", kernel, nsErrorText(e))
			return
		}
		pl = pipeline{pso: pso, maxThreads: pso.MaxTotalThreadsPerThreadgroup()}
	})
	if err != nil {
		return pipeline{}, err
	}
	p.psos[kernel] = pl
	return pl, nil
}

// library returns the compiled library l, compiling it on first use.
// p.mu is held.
func (p *pipelines) library(l metalshader.Library) (metal.LibraryObject, error) {
	if lib, ok := p.libs[l.Name]; ok {
		return lib, nil
	}
	var lib metal.LibraryObject
	var err error
	objc.WithAutoreleasePool(func() {
		opts := metal.NewCompileOptions() // autoreleased
		opts.SetFastMathEnabled(false)    // bf16 rounding relies on exact float ops and isnan
		if l.LanguageMajor > 0 {
			opts.SetLanguageVersion(metal.LanguageVersion(l.LanguageMajor<<16 | l.LanguageMinor))
		}
		var e foundation.Error
		lib = p.dev.NewLibraryWithSourceOptionsError(l.Source, opts, unsafe.Pointer(&e)) // +1
		if lib.IsNil() {
			err = fmt.Errorf("metal: newLibrary %s (MSL %d.%d): %s", l.Name, l.LanguageMajor, l.LanguageMinor, nsErrorText(e))
		}
	})
	if err != nil {
		return metal.LibraryObject{}, err
	}
	p.libs[l.Name] = lib
	return lib, nil
}

// release releases every pipeline and library.
func (p *pipelines) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pl := range p.psos {
		pl.pso.Release()
		delete(p.psos, k)
	}
	for k, lib := range p.libs {
		lib.Release()
		delete(p.libs, k)
	}
}

// nsErrorText is an NSError's description, or a note that there was none.
// Call it inside an autorelease pool.
func nsErrorText(e foundation.Error) string {
	if e.IsNil() {
		return "failed without an NSError"
	}
	return e.LocalizedDescription()
}
