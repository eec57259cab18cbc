package cluster

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/choreo-gpu/choreo/wire"
)

// FuzzControlMessages: whatever bytes a peer sends as a Hello or a Roster,
// decoding them and handing them to the rendezvous (rank 0's gather) or to
// a waiting rank (rosterOf) ends in a value or an error, never a panic,
// and an accepted roster lists each rank once.
func FuzzControlMessages(f *testing.F) {
	h, _ := proto.Marshal(&wire.Hello{Rank: 1, Size: 2, ControlAddr: "a:1", Run: "r", Version: Version})
	r, _ := proto.Marshal(&wire.Roster{Group: 9, Members: []*wire.Member{{Rank: 0}, {Rank: 1}}})
	f.Add(h, 2)
	f.Add(r, 2)
	f.Add([]byte{0xff, 0x01}, 3)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		size = 1 + (size&0xffff)%64
		var hello wire.Hello
		if proto.Unmarshal(b, &hello) == nil {
			g := newGather(size, "r")
			_, _ = g.add(&hello)
			_, _ = g.add(&hello)
			_ = g.roster(0)
		}
		var roster wire.Roster
		if proto.Unmarshal(b, &roster) == nil {
			if got, err := rosterOf(&roster, size); err == nil {
				for i, m := range got.Members {
					if m.Rank != i {
						t.Fatalf("member %d has rank %d", i, m.Rank)
					}
				}
			}
		}
	})
}
