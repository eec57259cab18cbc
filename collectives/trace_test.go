package collectives_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/trace"
)

// chromeEvent is an event of the Chrome trace event format, decoded
// loosely, so that the test itself checks each field's presence and type.
type chromeEvent map[string]any

func (e chromeEvent) str(k string) string { s, _ := e[k].(string); return s }
func (e chromeEvent) num(k string) float64 {
	f, _ := e[k].(float64)
	return f
}
func (e chromeEvent) arg(k string) any {
	a, _ := e["args"].(map[string]any)
	return a[k]
}

// TestTraceAllReduce4Ranks decodes the trace of a 4-rank all-reduce as the
// Chrome trace event format defines it (every event well formed, every
// flow's ends present and bound to a slice) and checks that its spans nest
// and order as the choreography says: per rank and fence, the GPU side's
// update before the CPU side's wait it releases, the CPU side's update
// before the GPU side's wait, and the comm task around its fence calls.
func TestTraceAllReduce4Ranks(t *testing.T) {
	const n, calls = 4, 3
	tr := trace.New()
	w := newWorld(t, n, collectives.WithTracer(tr))
	ctx := testenv.Ctx(t, 60*time.Second)
	for range calls {
		var ys []*array.Array
		for r := range n {
			x, err := array.Full(w.s[r], []int{1024}, gpu.Float32, float64(r+1))
			if err != nil {
				t.Fatal(err)
			}
			// Donated: the input has a producer event, so both fence
			// directions are used.
			y, err := w.groups[r].AllReduce(w.s[r], x, collectives.Sum, collectives.Donate())
			if err != nil {
				t.Fatal(err)
			}
			ys = append(ys, y)
		}
		for _, y := range ys {
			vals, err := array.ToSlice[float32](ctx, y)
			if err != nil {
				t.Fatal(err)
			}
			if vals[0] != 10 {
				t.Fatalf("all-reduce = %v, want 10", vals[0])
			}
		}
	}
	for r := range n { // every task has ended: its span is recorded
		if err := w.groups[r].Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := tr.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("CHOREO_TRACE_OUT"); path != "" {
		_ = os.WriteFile(path, buf.Bytes(), 0o644)
	}
	evs := decodeChrome(t, buf.Bytes())
	checkWellFormed(t, evs)
	checkNesting(t, evs)
	checkFlows(t, evs)
	checkChoreography(t, evs, n, calls)
}

// decodeChrome decodes a trace in the JSON object form.
func decodeChrome(t *testing.T, b []byte) []chromeEvent {
	t.Helper()
	var f struct {
		TraceEvents []chromeEvent `json:"traceEvents"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("trace is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.TraceEvents) == 0 {
		t.Fatal("no traceEvents")
	}
	return f.TraceEvents
}

// checkWellFormed checks the fields every phase requires.
func checkWellFormed(t *testing.T, evs []chromeEvent) {
	t.Helper()
	for i, e := range evs {
		bad := func(why string) { t.Errorf("event %d %v: %s", i, map[string]any(e), why) }
		if _, ok := e["name"].(string); !ok {
			bad("no name")
		}
		for _, k := range []string{"pid", "tid"} {
			if _, ok := e[k].(float64); !ok && e.str("ph") != "M" || k == "pid" && !ok {
				bad("no " + k)
			}
		}
		ph := e.str("ph")
		if ph != "M" {
			if ts, ok := e["ts"].(float64); !ok || ts < 0 {
				bad("no ts")
			}
		}
		switch ph {
		case "X":
			if d, ok := e["dur"].(float64); !ok || d < 0 {
				bad("complete event without dur")
			}
		case "i":
			if s := e.str("s"); s != "t" && s != "p" && s != "g" {
				bad("instant without scope")
			}
		case "b", "e", "s", "f":
			if e.str("id") == "" {
				bad("no id")
			}
			if ph == "f" && e.str("bp") != "e" {
				bad("flow end not bound to its enclosing slice")
			}
		case "M":
			if e.arg("name") == nil && e.arg("sort_index") == nil {
				bad("metadata without its value")
			}
		default:
			bad("unknown phase " + ph)
		}
	}
	// Async slices come in pairs.
	open := map[string]float64{}
	for _, e := range evs {
		k := fmt.Sprint(e["pid"], e.str("cat"), e.str("id"))
		switch e.str("ph") {
		case "b":
			open[k] = e.num("ts")
		case "e":
			b, ok := open[k]
			if !ok || e.num("ts") < b {
				t.Errorf("async end %v without an earlier begin", map[string]any(e))
			}
			delete(open, k)
		}
	}
	if len(open) != 0 {
		t.Errorf("%d async slices never end", len(open))
	}
}

type slice struct {
	name       string
	start, end float64
	args       map[string]any
}

// slicesByTrack collects the complete events per (pid, tid), by start.
func slicesByTrack(evs []chromeEvent) map[[2]float64][]slice {
	m := map[[2]float64][]slice{}
	for _, e := range evs {
		if e.str("ph") != "X" {
			continue
		}
		k := [2]float64{e.num("pid"), e.num("tid")}
		a, _ := e["args"].(map[string]any)
		m[k] = append(m[k], slice{e.str("name"), e.num("ts"), e.num("ts") + e.num("dur"), a})
	}
	for _, s := range m {
		slices.SortStableFunc(s, func(a, b slice) int {
			if a.start != b.start {
				if a.start < b.start {
					return -1
				}
				return 1
			}
			return 0
		})
	}
	return m
}

// checkNesting checks that on every track the slices nest or follow each
// other: none starts inside another and ends after it.
func checkNesting(t *testing.T, evs []chromeEvent) {
	t.Helper()
	const eps = 1e-6
	for k, ss := range slicesByTrack(evs) {
		var stack []slice
		for _, s := range ss {
			for len(stack) > 0 && stack[len(stack)-1].end <= s.start+eps {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 && s.end > stack[len(stack)-1].end+eps {
				t.Errorf("track %v: %s [%f, %f] overlaps %s [%f, %f] without nesting", k, s.name, s.start, s.end,
					stack[len(stack)-1].name, stack[len(stack)-1].start, stack[len(stack)-1].end)
			}
			stack = append(stack, s)
		}
	}
}

// checkFlows checks that every flow has one start and one end, in that
// order, on one rank, each inside a slice of its track.
func checkFlows(t *testing.T, evs []chromeEvent) {
	t.Helper()
	tracks := slicesByTrack(evs)
	inside := func(e chromeEvent) bool {
		for _, s := range tracks[[2]float64{e.num("pid"), e.num("tid")}] {
			if s.start <= e.num("ts") && e.num("ts") <= s.end {
				return true
			}
		}
		return false
	}
	starts, ends := map[string]chromeEvent{}, map[string]chromeEvent{}
	for _, e := range evs {
		switch e.str("ph") {
		case "s":
			if _, dup := starts[e.str("id")]; dup {
				t.Errorf("flow %s starts twice", e.str("id"))
			}
			starts[e.str("id")] = e
		case "f":
			if _, dup := ends[e.str("id")]; dup {
				t.Errorf("flow %s ends twice", e.str("id"))
			}
			ends[e.str("id")] = e
		}
	}
	if len(starts) == 0 {
		t.Fatal("no flow in the trace")
	}
	for id, s := range starts {
		f, ok := ends[id]
		if !ok {
			t.Errorf("flow %s has no end", id)
			continue
		}
		if s.num("pid") != f.num("pid") || f.num("ts") < s.num("ts") {
			t.Errorf("flow %s: start %v, end %v: not on one rank, in order", id, map[string]any(s), map[string]any(f))
		}
		if !inside(s) || !inside(f) {
			t.Errorf("flow %s: an end lies outside every slice of its track", id)
		}
	}
	for id := range ends {
		if _, ok := starts[id]; !ok {
			t.Errorf("flow %s has no start", id)
		}
	}
}

// checkChoreography checks, per rank and fence, the order that the comm
// task's steps (wait, collective, update) and each side's counts give: GPU
// update(1) starts before the comm task's wait(1) ends, the task's
// update(2) before the GPU's wait(2) ends, and the task's fence calls lie
// inside the task.
func checkChoreography(t *testing.T, evs []chromeEvent, n, calls int) {
	t.Helper()
	type key struct {
		pid   float64
		fence float64
		value float64
		name  string
	}
	byKey := map[key]slice{}
	tasks := map[float64][]slice{}
	tracks := slicesByTrack(evs)
	for k, ss := range tracks {
		for _, s := range ss {
			if s.name == "allreduce" {
				tasks[k[0]] = append(tasks[k[0]], s)
			}
			f, ok := s.args["fence"].(float64)
			if !ok {
				continue
			}
			v, _ := s.args["value"].(float64)
			byKey[key{k[0], f, v, s.name}] = s
		}
	}
	for pid := range n {
		if got := len(tasks[float64(pid)]); got != calls {
			t.Errorf("rank %d: %d allreduce task spans, want %d", pid, got, calls)
		}
	}
	pairs := 0
	for k, upd := range byKey {
		if k.name != "fence update" {
			continue
		}
		wait, ok := byKey[key{k.pid, k.fence, k.value, "fence wait"}]
		if !ok {
			t.Errorf("rank %v fence %v: update(%v) and no wait", k.pid, k.fence, k.value)
			continue
		}
		pairs++
		if upd.start > wait.end {
			t.Errorf("rank %v fence %v value %v: update starts at %f, after its wait ended at %f", k.pid, k.fence, k.value, upd.start, wait.end)
		}
	}
	if want := 2 * n * calls; pairs != want {
		t.Errorf("%d update/wait pairs, want %d (two per rank and call)", pairs, want)
	}
	flows := 0
	for _, e := range evs {
		if e.str("ph") == "s" {
			flows++
		}
	}
	if want := 2 * n * calls; flows != want {
		t.Errorf("%d flows, want %d: one per update/wait pair", flows, want)
	}
	// The CPU side's calls lie inside an allreduce task of their rank.
	for _, e := range evs {
		if e.str("cat") != "fence" || e.str("ph") != "X" {
			continue
		}
		pid := e.num("pid")
		in := false
		for _, task := range tasks[pid] {
			if task.start <= e.num("ts") && e.num("ts")+e.num("dur") <= task.end+1e-6 {
				in = true
			}
		}
		if !in {
			t.Errorf("rank %v: %s at %f lies outside every allreduce task", pid, e.str("name"), e.num("ts"))
		}
	}
	sawTransport := false
	for _, e := range evs {
		sawTransport = sawTransport || e.str("cat") == "transport"
	}
	if !sawTransport {
		t.Error("no transport call in the trace")
	}
}
