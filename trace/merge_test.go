package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bigID is above 2^53: a float64 rounds it (to 18446744073709549568).
const bigID = 18446744073709551557

// TestMergedIDsAreExact: a group id and a sequence number above 2^53
// survive writing, reading, merging and reading the merged file back, and
// a float64-reading decoder (as the viewers are) sees the group id exactly.
func TestMergedIDsAreExact(t *testing.T) {
	dir := t.TempDir()
	for r := range 2 {
		tr := New()
		tr.Rank(r).Record(Event{Kind: Span, Track: "comm", Name: "allreduce", Cat: "comm", TS: 1, Dur: 2, Group: bigID, Seq: bigID - 2, Fence: 1 << 60})
		if err := tr.Save(PartPath(dir, r)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "merged.json")
	res, err := MergeDir(dir, out, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Merged) != 2 || res.Note() != "" {
		t.Fatalf("merge result %+v (%q), want both parts whole", res, res.Note())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	spans := 0
	for _, e := range f.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		spans++
		if g := e.Args["group"]; g != "18446744073709551557" {
			t.Errorf("group %v (%T), want the id exactly", g, g)
		}
		if s := e.Args["seq"]; s != "18446744073709551555" {
			t.Errorf("seq %v (%T), want it exactly", s, s)
		}
		if fe, ok := e.Args["fence"].(string); !ok || fe != "1152921504606846976" {
			t.Errorf("fence %v (%T), want 2^60 exactly", e.Args["fence"], e.Args["fence"])
		}
	}
	if spans != 2 {
		t.Fatalf("%d spans merged, want 2", spans)
	}
	var loose struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &loose); err != nil { // numbers as float64
		t.Fatal(err)
	}
	for _, e := range loose.TraceEvents {
		if a, ok := e["args"].(map[string]any); ok && a["group"] != nil && a["group"] != "18446744073709551557" {
			t.Errorf("a float64 reader sees group %v", a["group"])
		}
	}
}

// TestReadKeepsNumbersExact: a number written by another tool in args
// passes through ReadFile as json.Number, not float64.
func TestReadKeepsNumbersExact(t *testing.T) {
	in := `{"otherData":{"choreo_epoch_unix_ns":"5","choreo_clock_offset_ns":"0"},"traceEvents":[{"name":"x","ph":"i","ts":1,"pid":0,"tid":1,"args":{"group":18446744073709551557}}]}`
	f, err := ReadFile(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := f.TraceEvents[0].Args["group"].(json.Number); !ok || n.String() != "18446744073709551557" {
		t.Errorf("group read as %v (%T)", f.TraceEvents[0].Args["group"], f.TraceEvents[0].Args["group"])
	}
}

// TestMergeDirToleratesCutAndMissingParts: of three ranks, one left a
// whole part, one a part cut mid-event (its process killed while writing)
// and one none; the merge keeps the whole part, the cut part's events
// before the cut, and names the other two.
func TestMergeDirToleratesCutAndMissingParts(t *testing.T) {
	dir := t.TempDir()
	var cut []byte
	for r := range 2 {
		tr := New()
		for i := range 10 {
			tr.Rank(r).Record(Event{Kind: Instant, Track: "x", Name: "e", TS: int64(i)})
		}
		var buf bytes.Buffer
		if err := tr.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		if r == 1 {
			b = b[:len(b)*2/3] // cut mid-event
			cut = b
		}
		if err := os.WriteFile(PartPath(dir, r), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadFile(bytes.NewReader(cut)); !errors.Is(err, ErrTruncated) {
		t.Errorf("reading the cut part: %v, want ErrTruncated", err)
	}
	out := filepath.Join(dir, "merged.json")
	res, err := MergeDir(dir, out, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Merged) != 1 || len(res.Truncated) != 1 || res.Truncated[0] != 1 || len(res.Missing) != 1 || res.Missing[0] != 2 {
		t.Errorf("merge result %+v", res)
	}
	if want := "rank 2 left no part; rank 1 cut short"; !strings.HasPrefix(res.Note(), want) {
		t.Errorf("note %q, want it to begin %q", res.Note(), want)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	per := map[int]int{}
	for _, e := range m.TraceEvents {
		if e.Ph == "i" {
			per[e.PID]++
		}
	}
	if per[0] != 10 || per[1] < 1 || per[1] >= 10 {
		t.Errorf("instants per rank %v, want rank 0's 10 and some of rank 1's", per)
	}
	if _, err := MergeDir(t.TempDir(), out, 2); !errors.Is(err, ErrNoParts) {
		t.Errorf("an empty directory merged: %v, want ErrNoParts", err)
	}
}

// TestStopDropsLaterEvents: after Stop a Recorder keeps what it had and
// drops what comes; the file still holds the events before it.
func TestStopDropsLaterEvents(t *testing.T) {
	tr := New()
	r := tr.Rank(0)
	r.Record(Event{Kind: Instant, Track: "x", Name: "before"})
	tr.Stop()
	r.Record(Event{Kind: Instant, Track: "x", Name: "after"})
	tr.Rank(1).Record(Event{Kind: Instant, Track: "x", Name: "after"})
	evs := r.Events()
	if len(evs) != 1 || evs[0].Name != "before" {
		t.Errorf("events %+v, want only the one before Stop", evs)
	}
	if n := len(tr.Rank(1).Events()); n != 0 {
		t.Errorf("a rank made after Stop kept %d events", n)
	}
}
