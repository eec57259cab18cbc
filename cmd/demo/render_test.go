package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/trace"
)

// TestRenderDrawsATrace draws a small trace of two ranks (a comm task with
// a fence wait inside, a GPU command, a transport call, a flow) as a PNG
// that decodes, and refuses a window around an op the trace lacks.
func TestRenderDrawsATrace(t *testing.T) {
	dir := t.TempDir()
	tr := trace.New()
	for r := range 2 {
		rec := tr.Rank(r)
		rec.Record(trace.Event{Kind: trace.Span, Cat: "gpu", Track: "gpu-0", Name: "fence update", TS: 1000, Dur: 500, Fence: 1, Value: 1, Flow: trace.FlowOut})
		rec.Record(trace.Event{Kind: trace.Span, Cat: "comm", Track: "comm", Name: "allreduce", TS: 1200, Dur: 3000, Bytes: 4096})
		rec.Record(trace.Event{Kind: trace.Span, Cat: "fence", Track: "comm", Name: "fence wait", TS: 1300, Dur: 400, Fence: 1, Value: 1, Flow: trace.FlowIn})
		rec.Record(trace.Event{Kind: trace.Span, Cat: "gpu", Track: "gpu-0", Name: "narrow", TS: 4100, Dur: 5})
		rec.Record(trace.Event{Kind: trace.Async, Cat: "transport", Track: "transport", Name: "send", TS: 2000, Dur: 900, Peer: 1 - r, Bytes: 4096})
	}
	in := filepath.Join(dir, "t.json")
	if err := tr.Save(in); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "t.png")
	if err := (&renderCmd{In: in, Out: out, Width: 20, Around: "allreduce", Nth: 1}).Run(nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the picture is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("picture of %v", b)
	}
	tl := newTimeline(mustRead(t, in), 0, 0)
	if len(tl.rows) != 6 || len(tl.flows) != 2 || len(tl.bars) != 10 {
		t.Errorf("%d rows, %d flows, %d bars; want 6 (3 tracks x 2 ranks), 2, 10", len(tl.rows), len(tl.flows), len(tl.bars))
	}
	svg := filepath.Join(dir, "t.svg")
	if err := (&renderCmd{In: in, Out: svg, Width: 40}).Run(nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), ">allreduce 4.0 KiB<"); n != 2 {
		t.Errorf("%d all-reduce bars labelled with op and size, want one per rank", n)
	}
	if strings.Contains(string(b), ">narrow<") {
		t.Error("a bar too narrow for its label was labelled")
	}
	if err := (&renderCmd{In: in, Out: out, Width: 20, Around: "broadcast", Nth: 1}).Run(nil); err == nil {
		t.Error("a window around an op the trace lacks was drawn")
	}
}

func mustRead(t *testing.T, path string) *trace.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tf, err := trace.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return tf
}
