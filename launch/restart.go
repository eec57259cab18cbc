package launch

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// runRestarting runs this node's ranks, and starts them all again after a
// failure while s.MaxRestarts allows (see Spec.MaxRestarts). Each start
// makes its own secret, coordinator port and run name where s leaves them
// to the launch, so that nothing of a failed start can reach the next;
// the deadline counts from the first. An elastic launch starts once: its
// restarts are of lost ranks, within that start (elastic.lost).
func runRestarting(s Spec) error {
	var end time.Time
	if s.Deadline > 0 {
		end = time.Now().Add(s.Deadline)
	}
	for n := 0; ; n++ {
		start := s
		start.Env = append(slices.Clip(s.Env), EnvRestartCount+"="+strconv.Itoa(n))
		if n > 0 && !end.IsZero() {
			start.Deadline = max(time.Until(end).Round(time.Millisecond), time.Millisecond)
		}
		err := runNode(start)
		if err == nil || s.Elastic || n >= s.MaxRestarts || !errors.Is(err, ErrFailed) || !end.IsZero() && time.Now().After(end) {
			return err
		}
		s.Log.Warn("restarting every rank", zap.Int("restart", n+1), zap.Int("max_restarts", s.MaxRestarts), zap.Error(err))
		if s.Restarting != nil {
			s.Restarting(n+1, err)
		}
	}
}
