package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/wire"
)

func hello(rank, size int, addr string) *wire.Hello {
	return &wire.Hello{Rank: uint32(rank), Size: uint32(size), ControlAddr: addr, DataAddr: addr + "d",
		Host: "h", Pid: int32(100 + rank), Run: "run", Version: Version}
}

// TestGather: rank 0 accepts each rank once (a repeat from the same
// process too), refuses disagreements, and lists who is missing.
func TestGather(t *testing.T) {
	g := newGather(3, "run")
	for _, h := range []*wire.Hello{hello(0, 3, "a:0"), hello(2, 3, "a:2"), hello(2, 3, "a:2")} {
		if err := g.add(h); err != nil {
			t.Fatal(err)
		}
	}
	if g.complete() || len(g.missing()) != 1 || g.missing()[0] != 1 {
		t.Fatalf("complete %v, missing %v", g.complete(), g.missing())
	}
	other := hello(2, 3, "b:2")
	badSize := hello(1, 4, "a:1")
	badRun := hello(1, 3, "a:1")
	badRun.Run = "other"
	badVersion := hello(1, 3, "a:1")
	badVersion.Version = Version + 1
	for _, c := range []struct {
		h    *wire.Hello
		want string
	}{{other, "already joined"}, {badSize, "world size 4"}, {badRun, `run "other"`},
		{badVersion, "version"}, {hello(5, 3, "a:5"), "out of range"}} {
		if err := g.add(c.h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if err := g.add(hello(1, 3, "a:1")); err != nil || !g.complete() {
		t.Fatalf("err %v complete %v", err, g.complete())
	}
	r, err := rosterOf(g.roster(9), 3)
	if err != nil || r.Group != 9 || r.Members[2].Control != "a:2" || r.DataAddrs()[1] != "a:1d" {
		t.Fatalf("roster %+v, %v", r, err)
	}
	if got := g.controls(); len(got) != 2 {
		t.Fatalf("controls %v", got)
	}
	if !errors.Is(refusal("x"), errs.ErrMismatch) {
		t.Fatal("a refusal must match ErrMismatch")
	}
}

// TestRosterOfRejects: a roster that does not list every rank once is
// refused.
func TestRosterOfRejects(t *testing.T) {
	dup := &wire.Roster{Group: 1, Members: []*wire.Member{{Rank: 0}, {Rank: 0}}}
	short := &wire.Roster{Group: 1, Members: []*wire.Member{{Rank: 0}}}
	far := &wire.Roster{Group: 1, Members: []*wire.Member{{Rank: 0}, {Rank: 7}}}
	for _, w := range []*wire.Roster{dup, short, far} {
		if _, err := rosterOf(w, 2); err == nil {
			t.Errorf("%v accepted", w)
		}
	}
}
