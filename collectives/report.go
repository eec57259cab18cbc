package collectives

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// OpError is how one collective failed on this rank: which op, group and
// sequence number, the rank that failed first and why, and which ranks had
// not arrived. Its Error is the one-line chain the collective always gave
// ("collectives: allreduce g1 r2 s5: ..."); Report is the same as a
// readable block. It unwraps to that chain, so errors.Is finds the
// sentinels (ErrTimeout, ErrPeerLost, ErrShapeMismatch, ErrAborted, ...)
// as before, and errors.As finds it through a failed output's error.
type OpError struct {
	Op    string // "allreduce", "send", ...
	Group uint64
	Seq   uint64
	Rank  int // the rank that reports
	// Origin is the rank that failed first: this rank, or the rank whose
	// abort failed the collective here.
	Origin int
	// Cause is why Origin failed (for this rank, the error itself).
	Cause error
	// Missing lists the ranks that had not called the collective when it
	// failed here; MissingKnown says whether this rank could know (it can
	// where every rank lives in this process: Local worlds).
	Missing      []int
	MissingKnown bool
	// Err is the whole chain below the op's label.
	Err error

	label opLabel
}

func (e *OpError) Error() string { return "collectives: " + e.label.String() + ": " + e.Err.Error() }

// Unwrap returns the chain, for errors.Is and errors.As.
func (e *OpError) Unwrap() error { return e.Err }

// Report is the failure as a block of lines, for a terminal.
func (e *OpError) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "collective failed: %s  group %d  seq %d\n", e.Op, e.Group, e.Seq)
	fmt.Fprintf(&b, "  reported by:  rank %d\n", e.Rank)
	who := fmt.Sprintf("rank %d", e.Origin)
	if e.Origin == e.Rank {
		who += " (this rank)"
	}
	fmt.Fprintf(&b, "  failed first: %s: %v\n", who, e.Cause)
	switch {
	case !e.MissingKnown:
		b.WriteString("  not arrived:  unknown (ranks in other processes)\n")
	case len(e.Missing) == 0:
		b.WriteString("  not arrived:  none (every rank had called it)\n")
	default:
		fmt.Fprintf(&b, "  not arrived:  %s\n", rankNames(e.Missing))
	}
	fmt.Fprintf(&b, "  error:        %v", e)
	return b.String()
}

func rankNames(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	if len(rs) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// opError builds the OpError of a collective of this group that failed
// with err.
func (g *Group) opError(l opLabel, err error) *OpError {
	e := &OpError{Op: l.name, Group: l.group, Seq: l.seq, Rank: l.rank, Origin: l.rank, Cause: err, Err: err, label: l}
	var ae *transport.AbortError
	if errors.As(err, &ae) {
		e.Origin, e.Cause = ae.Origin, ae.Cause
	}
	if g.board != nil && l.seq != 0 {
		e.Missing, e.MissingKnown = g.board.missing(l.seq), true
	}
	return e
}

// arrivals is an in-process world's record of how far each rank got: the
// highest collective sequence number each has called. A nil *arrivals
// knows nothing. Safe for concurrent use.
type arrivals struct{ last []atomic.Uint64 }

func newArrivals(n int) *arrivals { return &arrivals{last: make([]atomic.Uint64, n)} }

// arrive records that rank called collective seq.
func (a *arrivals) arrive(rank int, seq uint64) {
	if a == nil {
		return
	}
	for {
		cur := a.last[rank].Load()
		if cur >= seq || a.last[rank].CompareAndSwap(cur, seq) {
			return
		}
	}
}

// missing lists the ranks that have not called collective seq.
func (a *arrivals) missing(seq uint64) []int {
	var m []int
	for r := range a.last {
		if a.last[r].Load() < seq {
			m = append(m, r)
		}
	}
	return m
}
