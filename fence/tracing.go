package fence

import (
	"slices"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/streams"
	"github.com/choreo-gpu/choreo/trace"
)

// hangEvents is how many of each stream's last events a fence the
// watchdog releases logs.
const hangEvents = 8

// noteTrackLocked remembers, on a traced fence, the GPU stream it is used
// on, so a hang can show what that stream did last.
func (st *state) noteTrackLocked(s *streams.GPU) {
	if st.rec != nil && !slices.Contains(st.gpuTracks, s.Name()) {
		st.gpuTracks = append(st.gpuTracks, s.Name())
	}
}

// traceWait records a CPU-side wait for value v that began at t0.
func (st *state) traceWait(t0 int64, v uint32, err error) {
	e := trace.Event{Fence: st.id, Value: v, Word: trace.GPUWord, Flow: trace.FlowIn}
	if err != nil {
		e.Flow, e.Err = trace.NoFlow, err.Error()
	}
	st.rec.Span("fence", st.track, "fence wait", t0, e)
}

// logHang logs, for a traced fence the watchdog is releasing, the last
// events of every stream it involves: where the choreography stopped.
func (st *state) logHang(log *zap.Logger) {
	if st.rec == nil {
		return
	}
	st.mu.Lock()
	tracks := append([]string{st.track}, st.gpuTracks...)
	st.mu.Unlock()
	for _, e := range st.rec.Last(hangEvents, tracks...) {
		log.Warn("fence deadline passed: last events",
			zap.Stringer("fence", st), zap.Int("rank", st.rec.Rank()), zap.String("track", e.Track),
			zap.String("event", e.Name), zap.Int64("ts_ns", e.TS), zap.Int64("dur_ns", e.Dur),
			zap.Uint64("event_fence", e.Fence), zap.Uint32("value", e.Value), zap.String("error", e.Err))
	}
}
