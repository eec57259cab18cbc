package darwincheck

import (
	"go/ast"
	"go/token"
	"strconv"
)

// sentSelectors adds to set every selector a darwinkit package sends: the
// string literal argument of each objc.Sel call in its sources.
func sentSelectors(p *depPackage, set map[string]bool) {
	for _, f := range p.files {
		objc := objcName(f, p.types.Path())
		if objc == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 || !isObjcCall(call.Fun, objc, "Sel") {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					set[s] = true
				}
			}
			return true
		})
	}
}
