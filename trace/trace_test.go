package trace

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

// TestNilRecorderCostsNothing: every hook on a nil Recorder (tracing off)
// allocates nothing and records nothing.
func TestNilRecorderCostsNothing(t *testing.T) {
	var r *Recorder
	allocs := testing.AllocsPerRun(1000, func() {
		t0 := r.Now()
		r.Span("gpu", "s", "x", t0, Event{Fence: 1})
		r.Instant("fence", "s", "y", Event{})
		r.Record(Event{Name: "z"})
	})
	if allocs != 0 {
		t.Errorf("a nil Recorder allocates %v per call, want 0", allocs)
	}
	if r.On() || r.Events() != nil || r.Dropped() != 0 {
		t.Error("a nil Recorder recorded something")
	}
	var tr *Tracer
	if tr.Rank(0) != nil || tr.Recorders() != nil {
		t.Error("a nil Tracer made a Recorder")
	}
}

// TestRecordDoesNotAllocate: with tracing on, recording copies the event
// into the ring and allocates nothing.
func TestRecordDoesNotAllocate(t *testing.T) {
	r := New(WithCapacity(64)).Rank(0)
	allocs := testing.AllocsPerRun(1000, func() {
		r.Span("gpu", "s", "x", r.Now(), Event{Fence: 1, Value: 2})
	})
	if allocs != 0 {
		t.Errorf("Record allocates %v per event, want 0", allocs)
	}
}

// TestRingKeepsTheLastN: a full ring overwrites its oldest events and
// counts them.
func TestRingKeepsTheLastN(t *testing.T) {
	r := New(WithCapacity(4)).Rank(2)
	for i := range 10 {
		r.Record(Event{Name: strconv.Itoa(i), Track: "t" + strconv.Itoa(i%2)})
	}
	evs := r.Events()
	if len(evs) != 4 {
		t.Fatalf("%d events kept, want 4", len(evs))
	}
	for i, e := range evs {
		if e.Name != strconv.Itoa(6+i) {
			t.Errorf("event %d is %q, want %d (oldest first)", i, e.Name, 6+i)
		}
	}
	if r.Dropped() != 6 {
		t.Errorf("dropped %d, want 6", r.Dropped())
	}
	last := r.Last(1, "t0", "t1")
	if len(last) != 2 || last[0].Name != "8" || last[1].Name != "9" {
		t.Errorf("Last(1) = %+v, want events 8 and 9", last)
	}
}

// TestTimestampsAreMonotonic: Now never goes back.
func TestTimestampsAreMonotonic(t *testing.T) {
	r := New().Rank(0)
	prev := r.Now()
	for range 1000 {
		now := r.Now()
		if now < prev {
			t.Fatalf("Now went from %d back to %d", prev, now)
		}
		prev = now
	}
}

// TestFlowNeedsBothEnds: a flow is written only when its update and its
// wait are both kept, as a start and an end bound to their slices.
func TestFlowNeedsBothEnds(t *testing.T) {
	tr := New()
	r := tr.Rank(1)
	r.Record(Event{Kind: Span, Track: "gpu", Name: "fence update", TS: 10, Dur: 5, Fence: 3, Value: 1, Flow: FlowOut})
	r.Record(Event{Kind: Span, Track: "comm", Name: "fence wait", TS: 8, Dur: 12, Fence: 3, Value: 1, Flow: FlowIn})
	r.Record(Event{Kind: Span, Track: "comm", Name: "fence update", TS: 30, Dur: 1, Fence: 3, Value: 2, Flow: FlowOut})
	f := tr.Chrome()
	var s, e []ChromeEvent
	for _, ev := range f.TraceEvents {
		switch ev.Ph {
		case "s":
			s = append(s, ev)
		case "f":
			e = append(e, ev)
		}
	}
	if len(s) != 1 || len(e) != 1 {
		t.Fatalf("%d flow starts and %d ends, want one of each (value 2 has no wait)", len(s), len(e))
	}
	if s[0].ID != e[0].ID || s[0].TS != 0.010 || e[0].TS != 0.019 || e[0].BP != "e" {
		t.Errorf("flow start %+v, end %+v", s[0], e[0])
	}
}

// TestMergeShiftsByEpochAndOffset: parts of two processes whose clocks
// differ land on rank 0's time base.
func TestMergeShiftsByEpochAndOffset(t *testing.T) {
	a, b := New(), New()
	b.epoch = a.epoch.Add(3 * time.Millisecond) // started 3 ms later, by its own clock
	b.SetClockOffset(time.Millisecond)          // whose clock is 1 ms ahead of rank 0's
	a.Rank(0).Record(Event{Kind: Instant, Track: "x", Name: "a", TS: 0})
	b.Rank(1).Record(Event{Kind: Instant, Track: "x", Name: "b", TS: 0})
	var pa, pb bytes.Buffer
	if err := a.WriteJSON(&pa); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteJSON(&pb); err != nil {
		t.Fatal(err)
	}
	fa, err := ReadFile(&pa)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := ReadFile(&pb)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Merge(fa, fb)
	if err != nil {
		t.Fatal(err)
	}
	ts := map[string]float64{}
	for _, e := range m.TraceEvents {
		if e.Ph == "i" {
			ts[e.Name] = e.TS
		}
	}
	if ts["a"] != 0 || ts["b"] != 2000 {
		t.Errorf("merged at a=%v b=%v µs, want 0 and 2000", ts["a"], ts["b"])
	}
	if _, err := Merge(&File{}); err == nil {
		t.Error("a file without choreo's epoch merged")
	}
}

// BenchmarkRecorder: what one hook costs, tracing off (a nil Recorder:
// the hooks test it before they build an event) and on.
func BenchmarkRecorder(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		var r *Recorder
		b.ReportAllocs()
		for b.Loop() {
			t0 := r.Now()
			if r != nil {
				r.Span("gpu", "s", "x", t0, Event{Fence: 1})
			}
		}
	})
	b.Run("on", func(b *testing.B) {
		r := New().Rank(0)
		b.ReportAllocs()
		for b.Loop() {
			r.Span("gpu", "s", "x", r.Now(), Event{Fence: 1})
		}
	})
}
