package trace

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// File is a trace in the Chrome trace event format (the JSON object form).
// OtherData carries the part's epoch and clock offset, which Merge reads.
//
// OtherData is written first, so that a part cut short while it was being
// written (its process killed) still carries its time base.
type File struct {
	OtherData       map[string]any `json:"otherData,omitempty"`
	DisplayTimeUnit string         `json:"displayTimeUnit,omitempty"`
	TraceEvents     []ChromeEvent  `json:"traceEvents"`
}

// ChromeEvent is one event of the Chrome trace event format: ph is the
// phase (X complete, i instant, b/e async begin/end, s/f flow start/end,
// M metadata), ts and dur are microseconds, pid the rank, tid the track.
type ChromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	ID   string         `json:"id,omitempty"`
	BP   string         `json:"bp,omitempty"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// The keys of File.OtherData that Merge reads.
const (
	otherEpoch  = "choreo_epoch_unix_ns"
	otherOffset = "choreo_clock_offset_ns"
)

// WriteJSON writes every rank's events as one Chrome trace.
func (t *Tracer) WriteJSON(w io.Writer) error {
	f := t.Chrome()
	if err := json.NewEncoder(w).Encode(f); err != nil {
		return fmt.Errorf("trace: write json: %w", err)
	}
	return nil
}

// Chrome converts every rank's events into a Chrome trace: one process
// per rank, one thread (track) per stream, async slices for transport
// calls, and a flow from each fence update to the wait it released where
// both ends are still in the buffers.
func (t *Tracer) Chrome() *File {
	f := &File{DisplayTimeUnit: "ns", TraceEvents: []ChromeEvent{}}
	if t == nil {
		return f
	}
	f.OtherData = map[string]any{
		otherEpoch:  strconv.FormatInt(t.epoch.UnixNano(), 10),
		otherOffset: strconv.FormatInt(t.offset.Load(), 10),
	}
	for _, r := range t.Recorders() {
		f.TraceEvents = append(f.TraceEvents, chromeRank(r.rank, r.Events())...)
	}
	return f
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// flowID names the flow of (rank, fence, value) below 2^53, so that
// JavaScript viewers read it exactly.
func flowID(rank int, fence uint64, value uint32) string {
	id := uint64(rank&0xff)<<45 | (fence&0xffffffff)<<13 | uint64(value&0x1fff)
	return "0x" + strconv.FormatUint(id, 16)
}

type flowKey struct {
	fence uint64
	value uint32
}

// chromeRank converts one rank's events.
func chromeRank(rank int, evs []Event) []ChromeEvent {
	out := []ChromeEvent{
		{Name: "process_name", Ph: "M", PID: rank, Args: map[string]any{"name": fmt.Sprintf("rank %d", rank)}},
		{Name: "process_sort_index", Ph: "M", PID: rank, Args: map[string]any{"sort_index": rank}},
	}
	tids := map[string]int{}
	tid := func(track string) int {
		id, ok := tids[track]
		if !ok {
			id = len(tids) + 1
			tids[track] = id
			out = append(out,
				ChromeEvent{Name: "thread_name", Ph: "M", PID: rank, TID: id, Args: map[string]any{"name": track}},
				ChromeEvent{Name: "thread_sort_index", Ph: "M", PID: rank, TID: id, Args: map[string]any{"sort_index": id}})
		}
		return id
	}
	// Flows whose two ends are both kept.
	outs, ins := map[flowKey]bool{}, map[flowKey]bool{}
	for _, e := range evs {
		switch e.Flow {
		case FlowOut:
			outs[flowKey{e.Fence, e.Value}] = true
		case FlowIn:
			ins[flowKey{e.Fence, e.Value}] = true
		}
	}
	var body []ChromeEvent
	for i, e := range evs {
		ce := ChromeEvent{Name: e.Name, Cat: e.Cat, TS: us(e.TS), PID: rank, TID: tid(e.Track), Args: args(e)}
		switch e.Kind {
		case Span:
			d := us(e.Dur)
			ce.Ph, ce.Dur = "X", &d
			body = append(body, ce)
		case Instant:
			ce.Ph, ce.S = "i", "t"
			body = append(body, ce)
		case Async:
			ce.Ph, ce.ID = "b", "0x"+strconv.FormatUint(uint64(rank&0xff)<<45|uint64(i), 16)
			end := ce
			end.Ph, end.TS, end.Args = "e", us(e.End()), nil
			body = append(body, ce, end)
		default:
			continue
		}
		k := flowKey{e.Fence, e.Value}
		if e.Flow != NoFlow && outs[k] && ins[k] {
			fl := ChromeEvent{Name: "fence", Cat: "fence", TS: us(flowTS(e)), PID: rank, TID: ce.TID, ID: flowID(rank, e.Fence, e.Value)}
			if e.Flow == FlowOut {
				fl.Ph = "s"
			} else {
				fl.Ph, fl.BP = "f", "e"
			}
			body = append(body, fl)
		}
	}
	slices.SortStableFunc(body, func(a, b ChromeEvent) int {
		if c := cmp.Compare(a.TS, b.TS); c != 0 {
			return c
		}
		return cmp.Compare(durOf(b), durOf(a)) // a parent before its children
	})
	return append(out, body...)
}

// flowTS is where an event's flow end sits: FlowTS if set, else a
// span's start (an update's arrow leaves as it begins) or just before its
// end (a wait's arrow lands inside it).
func flowTS(e Event) int64 {
	switch {
	case e.FlowTS != 0:
		return e.FlowTS
	case e.Flow == FlowOut || e.Dur <= 1:
		return e.TS
	default:
		return e.End() - 1
	}
}

func durOf(e ChromeEvent) float64 {
	if e.Dur == nil {
		return -1
	}
	return *e.Dur
}

// maxExact is the largest integer a JSON reader that holds numbers as
// float64 (JavaScript's viewers, Python's json) reads exactly: 2^53.
const maxExact = 1 << 53

// exact is v as a JSON number where every reader reads it exactly, else
// as its decimal string.
func exact(v uint64) any {
	if v <= maxExact {
		return v
	}
	return strconv.FormatUint(v, 10)
}

// args is an event's details, as the viewers show them. A group id is a
// decimal string (64-bit ids are random: a float64 would round them).
func args(e Event) map[string]any {
	a := map[string]any{}
	if e.Fence != 0 {
		a["fence"] = exact(e.Fence)
		a["value"] = e.Value
	}
	if e.Group != 0 || e.Seq != 0 {
		a["group"], a["seq"] = strconv.FormatUint(e.Group, 10), exact(e.Seq)
	}
	if e.Cat == "transport" {
		a["peer"] = e.Peer
	}
	if e.Via != "" {
		a["via"] = e.Via
	}
	if e.Bytes != 0 {
		a["bytes"] = e.Bytes
	}
	if e.Count > 1 {
		a["count"] = e.Count
	}
	if e.Err != "" {
		a["error"] = e.Err
	}
	if e.Enqueued != 0 {
		a["enqueued_us"] = us(e.Enqueued)
	}
	if e.Submitted != 0 {
		a["submitted_us"] = us(e.Submitted)
	}
	if len(a) == 0 {
		return nil
	}
	return a
}
