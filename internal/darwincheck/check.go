package darwincheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
)

// Checker type-checks packages for darwin/arm64 and lints their use of
// darwinkit. It keeps every package it imported, so checking several
// packages (or calling Check again) parses darwinkit and std only once. A
// Checker is not safe for concurrent use.
type Checker struct {
	// AllowSelectors are selectors the sel lint accepts although darwinkit
	// never sends them (newer Metal API, private selectors).
	AllowSelectors []string
	// Tests adds each package's _test.go files (in-package ones with the
	// package, external ones as their own package).
	Tests bool

	l     *loader
	traps map[*types.Func]string // darwinkit functions that always panic
	sels  map[string]bool        // selectors darwinkit sends
	seen  map[*depPackage]bool   // darwinkit packages already scanned
}

// NewChecker returns a Checker with an empty package cache.
func NewChecker() *Checker {
	return &Checker{
		l:     newLoader(),
		traps: map[*types.Func]string{},
		sels:  map[string]bool{},
		seen:  map[*depPackage]bool{},
	}
}

// Check checks the packages in the given directories (absolute or relative
// to the working directory) with their function bodies and returns every
// problem, sorted by position. The error is for a failure to run at all.
func (c *Checker) Check(dirs ...string) ([]Diagnostic, error) {
	var ds []Diagnostic
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("darwincheck: %w", err)
		}
		ds = append(ds, c.checkDir(abs)...)
	}
	return sortDiagnostics(ds), nil
}

// checkDir checks one package directory: its darwin/arm64 Go and cgo
// files and, with Tests, its in-package test files together, then its
// external test package (package x_test) separately.
func (c *Checker) checkDir(dir string) []Diagnostic {
	bp, err := c.l.ctxt.ImportDir(dir, 0)
	if err != nil {
		return []Diagnostic{{Pos: token.Position{Filename: dir}, Kind: KindLoad,
			Msg: fmt.Sprintf("no package for darwin/arm64: %v", err)}}
	}
	path := importPathOf(dir)
	names := append(append([]string{}, bp.GoFiles...), bp.CgoFiles...)
	if c.Tests {
		names = append(names, bp.TestGoFiles...)
	}
	ds := c.checkFiles(dir, path, names)
	if c.Tests && len(bp.XTestGoFiles) > 0 {
		ds = append(ds, c.checkFiles(dir, path+"_test", bp.XTestGoFiles)...)
	}
	ds = append(ds, c.depErrors()...)
	return ds
}

// checkFiles checks the named files of dir as one package, with function
// bodies, and lints them.
func (c *Checker) checkFiles(dir, path string, names []string) []Diagnostic {
	files, err := c.l.parseFiles(dir, path, names)
	if err != nil {
		return []Diagnostic{{Pos: token.Position{Filename: dir}, Kind: KindLoad, Msg: err.Error()}}
	}
	var ds []Diagnostic
	info := &types.Info{
		Types: map[ast.Expr]types.TypeAndValue{},
		Uses:  map[*ast.Ident]types.Object{},
	}
	conf := c.l.config(false, func(err error) {
		if te, ok := err.(types.Error); ok {
			ds = append(ds, Diagnostic{Pos: c.l.fset.Position(te.Pos), Kind: KindType, Msg: te.Msg})
			return
		}
		ds = append(ds, Diagnostic{Pos: token.Position{Filename: dir}, Kind: KindType, Msg: err.Error()})
	})
	conf.Check(path, c.l.fset, files, info)
	c.scanKit()
	ds = append(ds, c.lintTraps(info)...)
	ds = append(ds, c.lintSelectors(files, info)...)
	return ds
}

// depErrors reports type errors inside the dependencies bp imported from
// source (so far): with a broken dependency the check is not trustworthy.
func (c *Checker) depErrors() []Diagnostic {
	var ds []Diagnostic
	for _, p := range c.l.byDir {
		for i, te := range p.errs {
			if i == 3 {
				ds = append(ds, Diagnostic{Pos: c.l.fset.Position(te.Pos), Kind: KindLoad,
					Msg: fmt.Sprintf("dependency %s: %d more type errors", p.types.Path(), len(p.errs)-3)})
				break
			}
			ds = append(ds, Diagnostic{Pos: c.l.fset.Position(te.Pos), Kind: KindLoad,
				Msg: fmt.Sprintf("dependency %s does not type-check for darwin/arm64: %s", p.types.Path(), te.Msg)})
		}
	}
	return ds
}

// scanKit finds the traps and sent selectors of darwinkit packages
// imported since the last scan.
func (c *Checker) scanKit() {
	for _, p := range c.l.kitPackages() {
		if c.seen[p] {
			continue
		}
		c.seen[p] = true
		for _, t := range findTraps(c.l.fset, p) {
			c.traps[t.fn] = t.reason
		}
		sentSelectors(p, c.sels)
	}
}

// lintTraps reports every use (call or method value) of a trap function.
func (c *Checker) lintTraps(info *types.Info) []Diagnostic {
	var ds []Diagnostic
	for id, obj := range info.Uses {
		fn, ok := obj.(*types.Func)
		if !ok {
			continue
		}
		reason, ok := c.traps[fn.Origin()]
		if !ok {
			continue
		}
		ds = append(ds, Diagnostic{Pos: c.l.fset.Position(id.Pos()), Kind: KindTrap,
			Msg: fmt.Sprintf("%s panics on every call: %s; send the selector with objc.Call instead",
				funcName(fn), reason)})
	}
	return ds
}

// lintSelectors checks every objc.Sel call: its argument must be a
// constant string that darwinkit sends or that is allowed.
func (c *Checker) lintSelectors(files []*ast.File, info *types.Info) []Diagnostic {
	allowed := map[string]bool{}
	for _, s := range c.AllowSelectors {
		allowed[s] = true
	}
	var ds []Diagnostic
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 || !isObjcSel(call.Fun, info) {
				return true
			}
			pos := c.l.fset.Position(call.Args[0].Pos())
			tv := info.Types[call.Args[0]]
			if tv.Value == nil {
				ds = append(ds, Diagnostic{Pos: pos, Kind: KindSel,
					Msg: "objc.Sel argument is not a constant string; it cannot be checked"})
				return true
			}
			sel := constantString(tv)
			if !c.sels[sel] && !allowed[sel] {
				ds = append(ds, Diagnostic{Pos: pos, Kind: KindSel,
					Msg: fmt.Sprintf("selector %q is never sent by darwinkit (a typo?); allow it with -allow-sel if it is right", sel)})
			}
			return true
		})
	}
	return ds
}

// isObjcSel reports whether fun resolves to darwinkit's objc.Sel.
func isObjcSel(fun ast.Expr, info *types.Info) bool {
	var id *ast.Ident
	switch f := ast.Unparen(fun).(type) {
	case *ast.SelectorExpr:
		id = f.Sel
	case *ast.Ident:
		id = f
	default:
		return false
	}
	fn, ok := info.Uses[id].(*types.Func)
	return ok && fn.Pkg() != nil && fn.Pkg().Path() == objcPath && fn.Name() == "Sel"
}

// Traps lists the darwinkit functions and methods found so far that panic
// on every call (after Check or LoadKit), as "pkg.Recv.Method", sorted.
func (c *Checker) Traps(pkgPath string) []string {
	c.scanKit()
	var names []string
	for fn := range c.traps {
		if pkgPath == "" || fn.Pkg().Path() == pkgPath {
			names = append(names, funcName(fn))
		}
	}
	sort.Strings(names)
	return names
}

// LoadKit imports a package (a darwinkit one, typically) as a dependency,
// so that Traps and the selector set cover it.
func (c *Checker) LoadKit(importPath, fromDir string) error {
	abs, err := filepath.Abs(fromDir)
	if err != nil {
		return fmt.Errorf("darwincheck: %w", err)
	}
	if _, err := c.l.ImportFrom(importPath, abs, 0); err != nil {
		return err
	}
	c.scanKit()
	return nil
}

// funcName is "pkg.Func" or "pkg.Recv.Method".
func funcName(fn *types.Func) string {
	name := fn.Pkg().Name() + "."
	if r := fn.Type().(*types.Signature).Recv(); r != nil {
		t := r.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			name += n.Obj().Name() + "."
		}
	}
	return name + fn.Name()
}
