package collectives

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// NewJoined makes this rank's Group over t, a transport whose ranks live
// in separate processes, with group id id: what collectives/cluster's
// Join calls once its data plane is connected (a program uses Join, not
// this). It is New for such a group: the device path meets its peers
// through IPC, and before it returns every rank tells the others, over t
// and within ctx, which device it runs on (WithDevice), so that
// DataPathAuto knows whether they all share one. Every rank of the group
// calls it with the same id. leave, if not nil, runs once when the group
// closes, after t has closed (Join stops the rank's control-plane node
// there). On failure t is closed and leave has run.
func NewJoined(ctx context.Context, rt *actors.Runtime, t transport.Transport, id uint64, leave func(), opts ...Option) (*Group, error) {
	opts = append(opts[:len(opts):len(opts)], func(c *config) { c.processes = true })
	g, err := New(rt, t, id, opts...)
	if err != nil {
		if t != nil {
			_ = t.Close()
		}
		if leave != nil {
			leave()
		}
		return nil, err
	}
	g.onClose = leave
	if err := g.agreeOnDevice(ctx); err != nil {
		_ = g.Close()
		return nil, fmt.Errorf("collectives: new joined group %d rank %d: %w", id, g.Rank(), err)
	}
	return g, nil
}
