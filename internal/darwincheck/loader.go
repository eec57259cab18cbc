package darwincheck

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
)

// DarwinkitPrefix is the import path prefix of the darwinkit packages whose
// sources the lints scan.
const DarwinkitPrefix = "github.com/progrium/darwinkit/"

// objcPath is darwinkit's Objective-C runtime package.
const objcPath = DarwinkitPrefix + "objc"

// depPackage is a dependency imported from source: its types and, for
// darwinkit packages only, its syntax and definitions (what the lints need).
type depPackage struct {
	types *types.Package
	files []*ast.File   // darwinkit only
	info  *types.Info   // darwinkit only: Defs
	errs  []types.Error // type errors inside the dependency
	err   error         // could not be found or parsed
	ready bool          // false while it is being imported (cycle guard)
}

// loader imports packages from source for darwin/arm64 with FakeImportC.
// It implements types.ImporterFrom and caches every package by directory,
// so darwinkit is parsed and checked once per loader. Not safe for
// concurrent use.
type loader struct {
	ctxt  build.Context
	fset  *token.FileSet
	sizes types.Sizes
	byDir map[string]*depPackage
	found map[string]*build.Package // import path -> package, for non-std paths
}

func newLoader() *loader {
	return &loader{
		ctxt:  darwinContext(),
		fset:  token.NewFileSet(),
		sizes: types.SizesFor("gc", targetGOARCH),
		byDir: map[string]*depPackage{},
		found: map[string]*build.Package{},
	}
}

// Import implements types.Importer.
func (l *loader) Import(path string) (*types.Package, error) {
	return l.ImportFrom(path, "", 0)
}

// ImportFrom implements types.ImporterFrom: find the package as a darwin
// build would, parse it and check it without function bodies.
func (l *loader) ImportFrom(path, dir string, _ types.ImportMode) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	bp, err := l.find(path, dir)
	if err != nil {
		return nil, err
	}
	if p, ok := l.byDir[bp.Dir]; ok {
		if !p.ready {
			return nil, fmt.Errorf("darwincheck: import cycle through %s", bp.ImportPath)
		}
		if p.err != nil {
			return nil, p.err
		}
		return p.types, nil
	}
	p := &depPackage{}
	l.byDir[bp.Dir] = p
	defer func() { p.ready = true }()

	files, err := l.parse(bp)
	if err != nil {
		p.err = err
		return nil, err
	}
	kit := strings.HasPrefix(bp.ImportPath, DarwinkitPrefix)
	var info *types.Info
	if kit {
		p.files = files
		info = &types.Info{Defs: map[*ast.Ident]types.Object{}}
		p.info = info
	}
	conf := l.config(true, func(err error) {
		if te, ok := err.(types.Error); ok && !te.Soft {
			p.errs = append(p.errs, te)
		}
	})
	pkg, _ := conf.Check(bp.ImportPath, l.fset, files, info)
	p.types = pkg
	return pkg, nil
}

// config is the go/types configuration for darwin/arm64 cgo code.
func (l *loader) config(ignoreBodies bool, onError func(error)) *types.Config {
	return &types.Config{
		Importer:         l,
		Sizes:            l.sizes,
		FakeImportC:      true,
		IgnoreFuncBodies: ignoreBodies,
		Error:            onError,
	}
}

// find locates an import path as seen from srcDir, caching non-std
// lookups (each costs a `go list` run).
func (l *loader) find(path, srcDir string) (*build.Package, error) {
	cacheable := !build.IsLocalImport(path) && !l.isStd(path)
	if cacheable {
		if bp, ok := l.found[path]; ok {
			return bp, nil
		}
	}
	bp, err := l.ctxt.Import(path, srcDir, 0)
	if err != nil {
		var noGo *build.NoGoError
		if !errors.As(err, &noGo) {
			return nil, fmt.Errorf("darwincheck: import %q: %w", path, err)
		}
		return nil, fmt.Errorf("darwincheck: import %q: no Go files for darwin/arm64 in %s", path, bp.Dir)
	}
	if cacheable {
		l.found[path] = bp
	}
	return bp, nil
}

// isStd reports whether path is a standard-library package.
func (l *loader) isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// parse parses the Go and cgo files of bp that a darwin/arm64 build uses.
func (l *loader) parse(bp *build.Package) ([]*ast.File, error) {
	return l.parseFiles(bp.Dir, bp.ImportPath, append(append([]string{}, bp.GoFiles...), bp.CgoFiles...))
}

// parseFiles parses the named files of dir (package path, for errors).
func (l *loader) parseFiles(dir, path string, names []string) ([]*ast.File, error) {
	files := make([]*ast.File, 0, len(names))
	var errs []error
	for _, name := range names {
		f, err := parser.ParseFile(l.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, f)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("darwincheck: parse %s: %w", path, errors.Join(errs...))
	}
	return files, nil
}

// kitPackages returns the darwinkit packages imported so far.
func (l *loader) kitPackages() []*depPackage {
	var ps []*depPackage
	for _, p := range l.byDir {
		if p.ready && p.types != nil && p.info != nil {
			ps = append(ps, p)
		}
	}
	return ps
}
