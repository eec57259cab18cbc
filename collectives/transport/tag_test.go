package transport

import (
	"math"
	"testing"
)

// FuzzTags: point-to-point tags name (src, dst, seq) one to one within
// their limits and never equal a collective's tag; the steps of a
// collective's parts never collide; WithStep keeps the part; a derived
// group id never equals a world's.
func FuzzTags(f *testing.F) {
	f.Add(uint64(1), uint16(0), uint16(1), uint32(1), uint16(1), uint16(0), uint32(1), uint64(5), uint32(0), uint32(128), uint32(1), uint32(128))
	f.Add(uint64(math.MaxUint64), uint16(MaxP2PRank-1), uint16(0), uint32(math.MaxUint32), uint16(0), uint16(MaxP2PRank-1), uint32(0),
		uint64(MaxSeq-1), uint32(MaxParts-1), uint32(MaxStep-1), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, group uint64, src1, dst1 uint16, seq1 uint32, src2, dst2 uint16, seq2 uint32,
		collSeq uint64, part1, step1, part2, step2 uint32) {
		s1, d1 := int(src1)%MaxP2PRank, int(dst1)%MaxP2PRank
		s2, d2 := int(src2)%MaxP2PRank, int(dst2)%MaxP2PRank
		t1 := P2PTag(group, s1, d1, uint64(seq1))
		t2 := P2PTag(group, s2, d2, uint64(seq2))
		if (t1 == t2) != (s1 == s2 && d1 == d2 && seq1 == seq2) {
			t.Fatalf("P2PTag(%d, %d, %d) = %v, P2PTag(%d, %d, %d) = %v", s1, d1, seq1, t1, s2, d2, seq2, t2)
		}
		if t1.Group != group || !t1.P2P() || t1.Seq < MaxSeq {
			t.Fatalf("P2PTag(%d, %d, %d, %d) = %v: wrong group, or a Seq a collective could have", group, s1, d1, seq1, t1)
		}
		cs := collSeq % MaxSeq
		p1, p2 := part1%MaxParts, part2%MaxParts
		st1, st2 := step1%MaxStep, step2%MaxStep
		c1, c2 := CollTag(group, cs, p1, st1), CollTag(group, cs, p2, st2)
		if (c1 == c2) != (p1 == p2 && st1 == st2) {
			t.Fatalf("part %d step %d: %v; part %d step %d: %v", p1, st1, c1, p2, st2, c2)
		}
		if c1.P2P() || c1 == t1 || c1.Part() != p1 {
			t.Fatalf("collective tag %v: p2p %v, equals %v, or part %d != %d", c1, c1.P2P(), t1, c1.Part(), p1)
		}
		if w := c1.WithStep(st2); w != CollTag(group, cs, p1, st2) {
			t.Fatalf("%v.WithStep(%d) = %v, want part %d kept", c1, st2, w, p1)
		}
		if DerivedGroup(group) < 1<<63 || DerivedGroup(group)&^(1<<63) != group&^(1<<63) {
			t.Fatalf("DerivedGroup(%d) = %d", group, DerivedGroup(group))
		}
	})
}

// TestTagLayoutPanics: a tag outside the layout is a broken algorithm, not
// a message to send.
func TestTagLayoutPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"seq":      func() { CollTag(1, MaxSeq, 0, 0) },
		"part":     func() { CollTag(1, 1, MaxParts, 0) },
		"step":     func() { CollTag(1, 1, 0, MaxStep) },
		"src":      func() { P2PTag(1, MaxP2PRank, 0, 0) },
		"dst":      func() { P2PTag(1, 0, -1, 0) },
		"withstep": func() { CollTag(1, 1, 0, 0).WithStep(MaxStep) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestTagString: the three kinds of tag read as what they are.
func TestTagString(t *testing.T) {
	for tag, want := range map[Tag]string{
		CollTag(3, 7, 0, 128): "(group 3 seq 7 step 128)",
		CollTag(3, 7, 2, 5):   "(group 3 seq 7 part 2 step 5)",
		P2PTag(3, 1, 2, 9):    "(group 3 p2p 1->2 #9 step 0)",
	} {
		if got := tag.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", tag, got, want)
		}
	}
}
