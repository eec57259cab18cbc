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
		if _, err := g.add(h); err != nil {
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
		if _, err := g.add(c.h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := g.add(hello(1, 3, "a:1")); err != nil || !g.complete() {
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

// TestGatherDropAndReplace: a rank whose control connection ended is
// dropped, and a new process may take its rank then; one at the rank's
// address and host replaces it even before the drop (the old process
// cannot listen there any more) until the roster went out; rank 0 is
// never dropped; the roster carries each rank's transport.
func TestGatherDropAndReplace(t *testing.T) {
	g := newGather(3, "run")
	for _, h := range []*wire.Hello{hello(0, 3, "a:0"), hello(1, 3, "a:1"), hello(2, 3, "a:2")} {
		h.Transport = "tcp"
		if _, err := g.add(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := g.drop("a:0"); ok {
		t.Fatal("rank 0 dropped")
	}
	if r, ok := g.drop("a:1"); !ok || r != 1 || g.complete() || g.missing()[0] != 1 {
		t.Fatalf("drop: rank %d %v, missing %v", r, ok, g.missing())
	}
	if _, ok := g.drop("a:1"); ok {
		t.Fatal("dropped twice")
	}
	elsewhere := hello(1, 3, "b:1") // after the drop, any address may take the rank
	elsewhere.Pid = 777
	if replaced, err := g.add(elsewhere); err != nil || replaced || !g.complete() {
		t.Fatalf("after the drop: replaced %v, %v, complete %v", replaced, err, g.complete())
	}
	again := hello(2, 3, "a:2") // a restarted rank 2, seen before its old connection's end
	again.Pid = 999
	again.Transport = "shm"
	if replaced, err := g.add(again); err != nil || !replaced || !g.complete() {
		t.Fatalf("restart at the same address: replaced %v, %v", replaced, err)
	}
	other := hello(2, 3, "a:2")
	other.Host = "elsewhere"
	if _, err := g.add(other); err == nil || !strings.Contains(err.Error(), "already joined") {
		t.Fatalf("the same address on another host: %v", err)
	}
	g.seal() // the roster goes out: a restart at the same address is refused, the roster's own process accepted again
	restarted := hello(2, 3, "a:2")
	restarted.Pid = 1000
	if _, err := g.add(restarted); err == nil || !strings.Contains(err.Error(), "the group formed with pid 999") {
		t.Fatalf("a restart after the roster: %v, want a refusal", err)
	}
	if replaced, err := g.add(again); err != nil || replaced {
		t.Fatalf("the roster's own process after the roster: replaced %v, %v", replaced, err)
	}
	r, err := rosterOf(g.roster(5), 3)
	if err != nil || r.Members[2].PID != 999 || r.Members[2].Transport != "shm" || r.Members[0].Transport != "tcp" ||
		r.Members[1].Control != "b:1" || r.rankAt("b:1") != 1 || r.rankAt("a:1") != -1 {
		t.Fatalf("roster %+v, %v", r, err)
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
