package remoting

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestStrangerWarnsAtMostOnceASecond: a burst of refusals gives one Warn,
// the rest at Debug; the next Warn, a second later, counts those held
// back.
func TestStrangerWarnsAtMostOnceASecond(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	w := &strangerWarns{log: zap.New(core)}
	for range 100 {
		w.warn("remote: authentication failed")
	}
	if n, d := logs.FilterLevelExact(zapcore.WarnLevel).Len(), logs.FilterLevelExact(zapcore.DebugLevel).Len(); n != 1 || d != 99 {
		t.Fatalf("%d at Warn and %d at Debug, want 1 and 99", n, d)
	}
	w.mu.Lock()
	w.last = w.last.Add(-warnEvery) // a second later
	w.mu.Unlock()
	w.warn("remote: authentication failed")
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 2 || warns[1].ContextMap()["held_back"] != int64(99) {
		t.Fatalf("warns %+v, want a second one saying 99 were held back", warns)
	}
}
