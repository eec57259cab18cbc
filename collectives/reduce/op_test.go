package reduce

import (
	"errors"
	"testing"
)

// TestOpNames: String and ParseOp round-trip and reject unknown names.
func TestOpNames(t *testing.T) {
	want := map[Op]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max"}
	for _, op := range Ops {
		if !op.Valid() || op.String() != want[op] {
			t.Errorf("%d: Valid %v String %q", op, op.Valid(), op.String())
		}
		got, err := ParseOp(" " + op.String() + " ")
		if err != nil || got != op {
			t.Errorf("ParseOp(%q) = %v, %v", op.String(), got, err)
		}
	}
	for _, s := range []string{"SUM", "Add", "mul", "product", "MAXIMUM", "minimum"} {
		if _, err := ParseOp(s); err != nil {
			t.Errorf("ParseOp(%q): %v", s, err)
		}
	}
	for _, op := range []Op{0, 5, 255} {
		if op.Valid() || op.String() == "" {
			t.Errorf("%d: Valid %v String %q", op, op.Valid(), op.String())
		}
	}
	for _, s := range []string{"", "avg", "sum2"} {
		if _, err := ParseOp(s); !errors.Is(err, ErrBadOp) {
			t.Errorf("ParseOp(%q) err = %v, want ErrBadOp", s, err)
		}
	}
}
