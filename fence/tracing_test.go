package fence_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/trace"
)

// TestTracedFenceRecordsAndLogsItsHang: a traced fence records its calls
// with their values (the GPU side's on its stream's track, the CPU side's
// on its own), and when the watchdog releases it because its GPU-side wait
// never got its update, the log shows the last events of both streams.
func TestTracedFenceRecordsAndLogsItsHang(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	r := newRig(t, actors.WithLogger(zap.New(core)))
	rec := trace.New().Rank(0)
	r.s.TraceTo(rec)
	f, err := testenv.Fences(t, r.rt).New(r.dev, fence.WithTimeout(300*time.Millisecond), fence.WithTrace(rec, "comm-test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Ctx(t, 30*time.Second)
	if err := f.UpdateGPU(r.s, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	out := guarded(t, r.s, f) // waits for a CPU update that never comes
	if err := out.Wait(ctx); !errors.Is(err, fence.ErrTimeout) {
		t.Fatalf("guarded output: %v, want the watchdog's ErrTimeout", err)
	}
	seen := map[string]bool{}
	for _, e := range rec.Events() {
		if e.Fence == f.ID() {
			seen[e.Track+" "+e.Name] = true
		}
	}
	for _, want := range []string{r.s.Name() + " fence update", "comm-test fence wait", "comm-test fence failed"} {
		if !seen[want] {
			t.Errorf("no %q event in %v", want, seen)
		}
	}
	hang := logs.FilterMessage("fence deadline passed: last events").All()
	tracks := map[string]bool{}
	for _, l := range hang {
		tracks[l.ContextMap()["track"].(string)] = true
	}
	if !tracks["comm-test"] || !tracks[r.s.Name()] {
		t.Errorf("the hang's log shows tracks %v, want comm-test and %s", tracks, r.s.Name())
	}
}
