package reduce_test

// Fuzz target for the reduce op names users pass (the demo's --op flag,
// collectives.ParseOp). Run with:
//
//	go test -run='^$' -fuzz='^FuzzParseOp$' -fuzztime=30s ./collectives/reduce

import (
	"errors"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/reduce"
)

// FuzzParseOp: a name parses to a valid op whose own name parses back to
// it, or fails with ErrBadOp and the invalid zero op; any Op value prints,
// and its name parses back exactly when it is valid.
func FuzzParseOp(f *testing.F) {
	for _, s := range []string{"sum", "prod", "min", "max", " Add ", "PRODUCT", "mul", "minimum", "maximum", "", "op(0)", "avg", "sum\x00", "ſum"} {
		f.Add(s, uint8(0))
	}
	f.Add("x", uint8(5))
	f.Add("x", uint8(255))
	f.Fuzz(func(t *testing.T, name string, raw uint8) {
		op, err := reduce.ParseOp(name)
		if err != nil {
			if !errors.Is(err, reduce.ErrBadOp) || op.Valid() {
				t.Fatalf("ParseOp(%q) = %v, %v: want an invalid op and ErrBadOp", name, op, err)
			}
		} else {
			if !op.Valid() {
				t.Fatalf("ParseOp(%q) = %v, not a valid op", name, op)
			}
			if back, err := reduce.ParseOp(op.String()); err != nil || back != op {
				t.Fatalf("ParseOp(%q) = %v, whose name parses to %v, %v", name, op, back, err)
			}
			if strings.TrimSpace(name) != name && name == strings.ToLower(name) {
				if back, err := reduce.ParseOp(strings.TrimSpace(name)); err != nil || back != op {
					t.Fatalf("ParseOp(%q) = %v, but without the spaces %v, %v", name, op, back, err)
				}
			}
		}
		x := reduce.Op(raw)
		back, err := reduce.ParseOp(x.String())
		if x.Valid() != (err == nil) || x.Valid() && back != x {
			t.Fatalf("Op(%d) prints as %q, which parses to %v, %v", raw, x.String(), back, err)
		}
	})
}
