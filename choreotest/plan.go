package choreotest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// Tracer collects the trace events of collective groups: pass Option() (or
// collectives.WithOpHook(tr.Record)) when making the groups. Events are
// kept in the order they were recorded and told apart by rank only, so
// give groups whose ranks a Watch must tell apart a Tracer each. Safe for
// concurrent use.
type Tracer struct {
	mu     sync.Mutex
	events []collectives.TraceEvent
}

// NewTracer returns an empty Tracer.
func NewTracer() *Tracer { return &Tracer{} }

// Record keeps ev; it is the function collectives.WithOpHook wants, and
// does not block.
func (t *Tracer) Record(ev collectives.TraceEvent) {
	t.mu.Lock()
	t.events = append(t.events, ev)
	t.mu.Unlock()
}

// Option is collectives.WithOpHook(t.Record).
func (t *Tracer) Option() collectives.Option { return collectives.WithOpHook(t.Record) }

// Events returns the events of rank, or of every rank if rank < 0.
func (t *Tracer) Events(rank int) []collectives.TraceEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []collectives.TraceEvent
	for _, ev := range t.events {
		if rank < 0 || ev.Rank == rank {
			out = append(out, ev)
		}
	}
	return out
}

// TraceStep renders a trace event as a plan reads it: the op, then its
// fence steps, "allreduce: gpu.update(1) gpu.wait(2) cpu.wait(1)
// cpu.update(2)"; just the op when it has none; " failed" appended when
// the collective failed.
func TraceStep(ev collectives.TraceEvent) string {
	var b strings.Builder
	b.WriteString(ev.Op)
	if len(ev.Steps) > 0 {
		b.WriteString(":")
		for _, s := range ev.Steps {
			b.WriteString(" ")
			b.WriteString(s.String())
		}
	}
	if ev.Err != nil {
		b.WriteString(" failed")
	}
	return b.String()
}

// FenceSteps renders fence steps as TraceStep does: "gpu.update(1) cpu.wait(1)".
func FenceSteps(steps []fence.Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.String()
	}
	return strings.Join(parts, " ")
}

// Plan is one rank's choreography, as a test states it and as a Watch saw
// it: the GPU stream's units in order (each unit's Step names joined by
// "+": a copy and the fence update enqueued with it read
// "copy-d2h+update"), the number of tasks the comm stream ran, and one
// TraceStep per collective that finished.
type Plan struct {
	GPU   []string
	Tasks int
	Fence []string
}

// String renders the plan on one line.
func (p Plan) String() string {
	return fmt.Sprintf("gpu %v, %d tasks, fence %q", p.GPU, p.Tasks, p.Fence)
}

// Equal reports whether p and q are the same plan (nil and empty lists are
// the same).
func (p Plan) Equal(q Plan) bool {
	return slices.Equal(p.GPU, q.GPU) && p.Tasks == q.Tasks && slices.Equal(p.Fence, q.Fence)
}

// Same returns n copies of p: the plan of n ranks that do alike.
func Same(n int, p Plan) []Plan {
	out := make([]Plan, n)
	for i := range out {
		out[i] = p
	}
	return out
}

// Diff compares the plans of each rank and returns "" if they are equal,
// else a report, rank by rank, of every part that differs, want against got.
func Diff(want, got []Plan) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "want %d ranks, got %d\n", len(want), len(got))
	}
	for r := range max(len(want), len(got)) {
		var w, g Plan
		switch {
		case r >= len(want):
			fmt.Fprintf(&b, "rank %d: not wanted, got %s\n", r, got[r])
			continue
		case r >= len(got):
			fmt.Fprintf(&b, "rank %d: missing, want %s\n", r, want[r])
			continue
		}
		w, g = want[r], got[r]
		if w.Equal(g) {
			continue
		}
		fmt.Fprintf(&b, "rank %d:\n", r)
		if !slices.Equal(w.GPU, g.GPU) {
			fmt.Fprintf(&b, "  gpu:   want %v\n         got  %v\n", w.GPU, g.GPU)
		}
		if w.Tasks != g.Tasks {
			fmt.Fprintf(&b, "  tasks: want %d\n         got  %d\n", w.Tasks, g.Tasks)
		}
		if !slices.Equal(w.Fence, g.Fence) {
			fmt.Fprintf(&b, "  fence: want %q\n         got  %q\n", w.Fence, g.Fence)
		}
	}
	return b.String()
}

// Rank is one rank under a Watch: its GPU stream and the Queue that records
// it (Recorder.NewStream returns both), its comm stream (Group.Comm()) and
// its number in trace events. Stream and Comm may be nil for a rank without
// one; then nothing of it is waited for or counted.
type Rank struct {
	Number int
	Stream *streams.GPU
	Queue  *Queue
	Comm   *streams.Comm
}

// Watch observes ranks from the moment it starts: what their queues
// receive, how many tasks their comm streams run and the trace events of
// their collectives. It is for one goroutine.
type Watch struct {
	tr    *Tracer
	ranks []Rank
	q0    []int    // queue records at the start
	ran0  []uint64 // comm tasks run at the start
	ev0   []int    // trace events at the start
}

// NewWatch waits (bounded by ctx) until the ranks' streams are idle (see
// Plans), so nothing enqueued earlier is taken for the watched work, and
// starts watching. tr may be nil (no Fence in the plans).
func NewWatch(ctx context.Context, tr *Tracer, ranks ...Rank) (*Watch, error) {
	w := &Watch{tr: tr, ranks: slices.Clone(ranks)}
	if err := w.settle(ctx); err != nil {
		return nil, fmt.Errorf("choreotest: watch: %w", err)
	}
	for _, r := range ranks {
		q0, ran0, ev0 := 0, uint64(0), 0
		if r.Queue != nil {
			q0 = r.Queue.Len()
		}
		if r.Comm != nil {
			ran0 = r.Comm.Ran()
		}
		if tr != nil {
			ev0 = len(tr.Events(r.Number))
		}
		w.q0, w.ran0, w.ev0 = append(w.q0, q0), append(w.ran0, ran0), append(w.ev0, ev0)
	}
	return w, nil
}

// settle waits for every rank's comm stream to run out of tasks, then for
// its GPU stream to complete everything enqueued, then for its queue to
// complete every batch: the comm tasks come first because the GPU side's
// waits pass only after their updates.
func (w *Watch) settle(ctx context.Context) error {
	for _, r := range w.ranks {
		if r.Comm == nil {
			continue
		}
		for r.Comm.Pending() > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("rank %d: %s still has %d tasks: %w", r.Number, r.Comm.Name(), r.Comm.Pending(), ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	for _, r := range w.ranks {
		if r.Stream != nil {
			if err := r.Stream.Last().Wait(ctx); err != nil {
				return fmt.Errorf("rank %d: %w", r.Number, err)
			}
		}
		if r.Queue != nil {
			if err := r.Queue.Idle(ctx); err != nil {
				return fmt.Errorf("rank %d: %w", r.Number, err)
			}
		}
	}
	return nil
}

// Plans waits (bounded by ctx) until the ranks are idle: every comm task
// has run, every GPU command enqueued has completed. Then it returns what
// each rank did since the Watch started, one Plan per rank in the order
// they were given.
func (w *Watch) Plans(ctx context.Context) ([]Plan, error) {
	if err := w.settle(ctx); err != nil {
		return nil, fmt.Errorf("choreotest: plans: %w", err)
	}
	plans := make([]Plan, len(w.ranks))
	for i, r := range w.ranks {
		p := &plans[i]
		if r.Queue != nil {
			p.GPU = unitSteps(r.Queue.batchesFrom(w.q0[i]))
		}
		if r.Comm != nil {
			p.Tasks = int(r.Comm.Ran() - w.ran0[i])
		}
		if w.tr != nil {
			for _, ev := range w.tr.Events(r.Number)[w.ev0[i]:] {
				p.Fence = append(p.Fence, TraceStep(ev))
			}
		}
	}
	return plans, nil
}

// Expect is Plans compared with want: nil if every rank did what it
// wanted, else an error with Diff's report.
func (w *Watch) Expect(ctx context.Context, want ...Plan) error {
	got, err := w.Plans(ctx)
	if err != nil {
		return err
	}
	if d := Diff(want, got); d != "" {
		return fmt.Errorf("choreotest: plans differ (want vs got):\n%s", strings.TrimSuffix(d, "\n"))
	}
	return nil
}

// Hold holds back s: it enqueues a GPU-side wait on a fresh fence word of
// s's device, so every command enqueued after it stays pending (an input
// whose producer has not run) until open is called. open is idempotent;
// call it before the test ends (defer it) or the stream drains only when
// it closes. The wait shows in a Watch's plan as a "wait" unit.
func Hold(s *streams.GPU) (open func(), err error) {
	if s == nil {
		return nil, fmt.Errorf("choreotest: hold: nil stream: %w", gpu.ErrBadArgument)
	}
	w, err := s.Device().NewFenceWord()
	if err != nil {
		return nil, fmt.Errorf("choreotest: hold %s: %w", s.Name(), err)
	}
	// The word is freed once the wait has run, not before, and open
	// never stores into a freed word.
	var mu sync.Mutex
	freed, opened := false, false
	release := func(error) {
		mu.Lock()
		defer mu.Unlock()
		freed = true
		w.Free()
	}
	if _, err := s.Enqueue([]gpu.Command{gpu.WaitValue{Word: w, Value: 1}}, release); err != nil {
		release(err)
		return nil, fmt.Errorf("choreotest: hold %s: %w", s.Name(), err)
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if !freed && !opened {
			opened = true
			w.Store(gpu.StopValue)
		}
	}, nil
}
