package darwincheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
)

// trap describes a darwinkit function that panics on every call.
type trap struct {
	fn     *types.Func
	reason string
}

// findTraps scans a darwinkit package's function bodies for calls to
// objc.WrapAsProtocol whose type argument is not an interface type:
// WrapAsProtocol starts with
//
//	if reflect.TypeOf((*T)(nil)).Elem().Kind() != reflect.Interface { panic(...) }
//
// so such a function panics whenever it is called. The type argument is
// the explicit one (WrapAsProtocol[T](...)) or, as in darwinkit's generated
// code, inferred from the second argument, a parameter of the function.
func findTraps(fset *token.FileSet, p *depPackage) []trap {
	var traps []trap
	for _, f := range p.files {
		objc := objcName(f, p.types.Path())
		if objc == "" {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn, ok := p.info.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			sig := fn.Type().(*types.Signature)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isObjcCall(call.Fun, objc, "WrapAsProtocol") {
					return true
				}
				t := wrapTypeArg(fset, p, sig, call)
				if t != nil && !types.IsInterface(t) {
					traps = append(traps, trap{fn: fn, reason: fmt.Sprintf(
						"it passes %s (not an interface) to objc.WrapAsProtocol, which panics",
						types.TypeString(t, types.RelativeTo(p.types)))})
					return false
				}
				return true
			})
		}
	}
	return traps
}

// wrapTypeArg returns WrapAsProtocol's type argument at call, or nil when
// it cannot be told from the declaration alone.
func wrapTypeArg(fset *token.FileSet, p *depPackage, sig *types.Signature, call *ast.CallExpr) types.Type {
	if ix, ok := ast.Unparen(call.Fun).(*ast.IndexExpr); ok {
		tv, err := types.Eval(fset, p.types, ix.Index.Pos(), types.ExprString(ix.Index))
		if err == nil && tv.IsType() {
			return tv.Type
		}
		return nil
	}
	if len(call.Args) != 2 {
		return nil
	}
	id, ok := ast.Unparen(call.Args[1]).(*ast.Ident)
	if !ok {
		return nil
	}
	for i := range sig.Params().Len() {
		if v := sig.Params().At(i); v.Name() == id.Name {
			return v.Type()
		}
	}
	if r := sig.Recv(); r != nil && r.Name() == id.Name {
		return r.Type()
	}
	return nil
}

// objcName returns the name file f uses for darwinkit's objc package: its
// import name, "." inside the objc package itself, "" if f does not use it.
func objcName(f *ast.File, pkgPath string) string {
	if pkgPath == objcPath {
		return "."
	}
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == objcPath {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "objc"
		}
	}
	return ""
}

// isObjcCall reports whether fun (a call's function expression, possibly
// instantiated) names objc.<name>, spelled with the file's objc name.
func isObjcCall(fun ast.Expr, objc, name string) bool {
	fun = ast.Unparen(fun)
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	switch f := ast.Unparen(fun).(type) {
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && x.Name == objc && f.Sel.Name == name
	case *ast.Ident:
		return objc == "." && f.Name == name
	}
	return false
}
