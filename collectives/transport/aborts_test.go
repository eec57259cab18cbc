package transport

import (
	"errors"
	"testing"
)

// TestAborts: the first abort of a collective is its record; a remote one
// made earlier (or at the same time by a lower origin) replaces it, a local
// one never does; the memory forgets the oldest beyond AbortMemory.
func TestAborts(t *testing.T) {
	var a Aborts
	tag := Tag{Group: 1, Seq: 7, Step: 3}
	if a.Of(tag) != nil {
		t.Fatal("an empty memory knows an abort")
	}
	first := &AbortError{Origin: 2, Group: 1, Seq: 7, Cause: errors.New("first")}
	if !a.Record(first, 100, true) || a.Of(Tag{Group: 1, Seq: 7}) != first {
		t.Fatal("the first abort is not the record")
	}
	if a.Record(&AbortError{Origin: 0, Group: 1, Seq: 7}, 50, true) {
		t.Fatal("a local abort replaced a known one")
	}
	if a.Record(&AbortError{Origin: 3, Group: 1, Seq: 7}, 100, false) {
		t.Fatal("a remote abort made at the same time by a higher origin replaced the record")
	}
	earlier := &AbortError{Origin: 1, Group: 1, Seq: 7}
	if !a.Record(earlier, 100, false) || a.Of(tag) != earlier {
		t.Fatal("an abort made at the same time by a lower origin did not replace the record")
	}
	for i := range AbortMemory {
		a.Record(&AbortError{Group: 2, Seq: uint64(i)}, 1, true)
	}
	if a.Of(tag) != nil || a.Of(Tag{Group: 2, Seq: AbortMemory - 1}) == nil {
		t.Fatal("the memory did not forget its oldest record first")
	}
}
