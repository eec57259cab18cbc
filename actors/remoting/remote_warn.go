package remoting

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// warnEvery is how often what strangers cause may be logged at Warn.
const warnEvery = time.Second

// strangerWarns logs the refusals strangers cause (a wrong proof, bytes
// that are not the handshake) at Warn at most once every warnEvery, saying
// how many were held back since the last one; the others go to Debug. So
// a stranger who knows no secret cannot flood the log. Safe for concurrent
// use.
type strangerWarns struct {
	log *zap.Logger

	mu   sync.Mutex
	last time.Time
	held int
}

func (w *strangerWarns) warn(msg string, fields ...zap.Field) {
	now := time.Now()
	w.mu.Lock()
	if now.Sub(w.last) < warnEvery {
		w.held++
		w.mu.Unlock()
		w.log.Debug(msg, fields...)
		return
	}
	held := w.held
	w.last, w.held = now, 0
	w.mu.Unlock()
	if held > 0 {
		fields = append(fields, zap.Int("held_back", held))
	}
	w.log.Warn(msg, fields...)
}
