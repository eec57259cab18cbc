package algo

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Tag steps. The match uses steps below stepData; each algorithm numbers
// its messages from stepData up (messages on one tag between a pair are
// FIFO, so a stream of chunks needs one step, not one per chunk).
const (
	stepMatch  = 0   // .. 63: dissemination rounds of the match
	stepWindow = 64  // the PeerAccess window of the collective
	stepData   = 128 // algorithm messages
)

// coll is one rank's running collective: the call's context, transport,
// descriptor and options, and the resolved algorithm.
type coll struct {
	ctx     context.Context
	t       transport.Transport
	pa      transport.PeerAccess // nil when the transport has none
	d       Desc
	o       Options
	rank, n int
	alg     Algorithm
	small   bool // the latency variant of alg
	// base is the collective's tag (step 0), set when the descriptor fits
	// the tag layout (tagged); an untagged call fails before it sends.
	base   transport.Tag
	tagged bool
}

func newColl(ctx context.Context, t transport.Transport, d Desc, kind Kind, opts []Option) *coll {
	d.Kind = kind
	c := &coll{ctx: ctx, t: t, d: d, o: buildOptions(opts), rank: t.Rank(), n: t.Size()}
	p2p := kind == KindSend || kind == KindRecv // tagged by p2p
	if !p2p && d.Seq < transport.MaxSeq && d.Part < transport.MaxParts {
		c.base, c.tagged = transport.CollTag(d.Group, d.Seq, d.Part, 0), true
	}
	c.pa, _ = t.(transport.PeerAccess)
	c.o.chunkDefault(c.pa != nil)
	return c
}

// tag is the tag of the collective's step step (its part kept).
func (c *coll) tag(step uint32) transport.Tag { return c.base.WithStep(step) }

// agreedError marks an error every rank reaches on its own from the matched
// descriptor (a mismatch, an invalid op or root): no abort is needed, and
// not aborting keeps each rank's own, precise error.
type agreedError struct{ error }

func (e agreedError) Unwrap() error { return e.error }

func agreed(format string, args ...any) error {
	return agreedError{fmt.Errorf(format, args...)}
}

// finish wraps a failure with its origin and, unless every rank reaches it
// by itself, aborts the collective so that the peers fail at once.
func (c *coll) finish(err error) error {
	if err == nil {
		return nil
	}
	var ag agreedError
	if !errors.As(err, &ag) && c.tagged {
		c.t.Abort(c.tag(0), fmt.Errorf("%s rank %d: %w", c.d.Kind, c.rank, err))
	} else {
		err = ag.error
	}
	return fmt.Errorf("algo: %s rank %d: %w", c.d.Kind, c.rank, err)
}

// checkLen checks that buf holds exactly elems elements of the dtype.
func (c *coll) checkLen(name string, buf []byte, elems int) error {
	if want := elems * c.d.DType.Size(); len(buf) != want {
		return fmt.Errorf("%s has %d bytes, want %d (%d x %s): %w", name, len(buf), want, elems, c.d.DType, ErrBadArgument)
	}
	return nil
}

// checkBasic validates the dtype and count.
func (c *coll) checkBasic() error {
	if !c.d.DType.Valid() {
		return fmt.Errorf("invalid dtype %v: %w", c.d.DType, ErrBadArgument)
	}
	if c.d.Count < 0 {
		return fmt.Errorf("negative count %d: %w", c.d.Count, ErrBadArgument)
	}
	if c.d.Seq >= transport.MaxSeq {
		return fmt.Errorf("seq %d >= %d: %w", c.d.Seq, uint64(transport.MaxSeq), ErrBadArgument)
	}
	if c.d.Part >= MaxParts || c.d.Whole < 0 {
		return fmt.Errorf("part %d of %d elements (parts below %d): %w", c.d.Part, c.d.Whole, MaxParts, ErrBadArgument)
	}
	return nil
}

// exchange sends out to dst and receives in from src at once (the two may
// be the same rank), returning when both are done. A send that goes at
// once (transport.TrySender) is made first, on this goroutine: a goroutine for it
// would cost a hand-off per exchange, which is most of a small message's
// latency.
func (c *coll) exchange(ctx context.Context, step uint32, dst int, out []byte, src int, in []byte) error {
	if ts, ok := c.t.(transport.TrySender); ok {
		done, err := ts.TrySend(ctx, dst, c.tag(step), out)
		if done {
			if err != nil {
				return err
			}
			return c.t.Recv(ctx, src, c.tag(step), in)
		}
	}
	sent := make(chan error, 1)
	go func() { sent <- c.t.Send(ctx, dst, c.tag(step), out) }()
	rerr := c.t.Recv(ctx, src, c.tag(step), in)
	serr := <-sent
	if rerr != nil {
		return rerr
	}
	return serr
}

// tasks runs a collective's goroutines under one context that the first
// failure cancels, so the others stop at once; wait returns that failure.
type tasks struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	first  error
}

func newTasks(parent context.Context) *tasks {
	t := &tasks{}
	t.ctx, t.cancel = context.WithCancel(parent)
	return t
}

// fail records err (nil is no failure) and, if it is the first, cancels
// the context.
func (t *tasks) fail(err error) {
	if err != nil {
		t.once.Do(func() { t.first = err; t.cancel() })
	}
}

// goDo runs f on a goroutine of its own; its error fails the tasks.
func (t *tasks) goDo(f func() error) { t.wg.Go(func() { t.fail(f()) }) }

// wait waits for every goroutine, releases the context and returns the
// first failure.
func (t *tasks) wait() error {
	t.wg.Wait()
	t.cancel()
	return t.first
}

func mod(a, n int) int { return ((a % n) + n) % n }
