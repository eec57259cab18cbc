package darwincheck

import (
	"cmp"
	"fmt"
	"go/token"
	"slices"
)

// Kind classifies a Diagnostic.
type Kind string

// The kinds of problem darwincheck reports.
const (
	KindType Kind = "type" // a go/types error in a checked package
	KindTrap Kind = "trap" // use of a darwinkit function that always panics
	KindSel  Kind = "sel"  // objc.Sel with a selector darwinkit never sends
	KindLoad Kind = "load" // a package could not be found, parsed or imported
)

// Diagnostic is one problem at one source position. Its String form is
// "file:line:col: kind: message", as compilers print.
type Diagnostic struct {
	Pos  token.Position
	Kind Kind
	Msg  string
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s", d.Pos, d.Kind, d.Msg)
}

// sortDiagnostics orders by file, line, column, then kind and message, and
// drops exact duplicates.
func sortDiagnostics(ds []Diagnostic) []Diagnostic {
	slices.SortFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.Pos.Filename, b.Pos.Filename),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column),
			cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Msg, b.Msg))
	})
	return slices.Compact(ds)
}
