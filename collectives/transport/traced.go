package transport

import (
	"context"

	"github.com/choreo-gpu/choreo/trace"
)

// traceTrack is the track a rank's transport calls show on.
const traceTrack = "transport"

// Traced returns t recording each Send and Recv (and Expose) as a span on
// rec, with its peer (and the carrier of its link, where t is a Linker),
// its bytes, its collective (Group, Seq) and its error.
// The spans of concurrent calls overlap, so they are async slices. The
// result keeps t's PeerAccess and Retirer (it implements each exactly
// where t does), and its TrySend reaches t's where t has one. A nil rec
// returns t itself.
func Traced(t Transport, rec *trace.Recorder) Transport {
	if rec == nil {
		return t
	}
	tt := &traced{Transport: t, rec: rec}
	pa, peers := t.(PeerAccess)
	r, retires := t.(Retirer)
	switch {
	case peers && retires:
		return &tracedPeersRetirer{tracedPeers: &tracedPeers{traced: tt, pa: pa}, r: r}
	case peers:
		return &tracedPeers{traced: tt, pa: pa}
	case retires:
		return &tracedRetirer{traced: tt, r: r}
	}
	return tt
}

// Linker is implemented by transports whose peers are linked by
// different carriers: Via names the carrier of peer's link ("" for none).
type Linker interface {
	Via(peer int) string
}

// traced is a Transport that records its calls; Rank, Size, Abort and
// Close are t's own.
type traced struct {
	Transport
	rec *trace.Recorder
}

func (t *traced) via(peer int) string {
	if l, ok := t.Transport.(Linker); ok && peer >= 0 {
		return l.Via(peer)
	}
	return ""
}

func (t *traced) Send(ctx context.Context, dst int, tag Tag, data []byte) error {
	t0 := t.rec.Now()
	err := t.Transport.Send(ctx, dst, tag, data)
	t.span("send", t0, dst, tag, len(data), err)
	return err
}

func (t *traced) Recv(ctx context.Context, src int, tag Tag, into []byte) error {
	t0 := t.rec.Now()
	err := t.Transport.Recv(ctx, src, tag, into)
	t.span("recv", t0, src, tag, len(into), err)
	return err
}

// TrySend sends at once through t's TrySend, or reports that it sent
// nothing where t has none.
func (t *traced) TrySend(ctx context.Context, dst int, tag Tag, data []byte) (bool, error) {
	ts, ok := t.Transport.(TrySender)
	if !ok {
		return false, nil
	}
	t0 := t.rec.Now()
	done, err := ts.TrySend(ctx, dst, tag, data)
	if done {
		t.span("send", t0, dst, tag, len(data), err)
	}
	return done, err
}

func (t *traced) span(name string, t0 int64, peer int, tag Tag, n int, err error) {
	e := trace.Event{Kind: trace.Async, Cat: "transport", Track: traceTrack, Name: name, TS: t0,
		Group: tag.Group, Seq: tag.Seq, Peer: peer, Via: t.via(peer), Bytes: int64(n)}
	e.Dur = t.rec.Now() - t0
	if err != nil {
		e.Err = err.Error()
	}
	t.rec.Record(e)
}

// tracedPeers is traced over a transport with PeerAccess.
type tracedPeers struct {
	*traced
	pa PeerAccess
}

// Expose implements PeerAccess: a barrier of the group, recorded as such.
func (t *tracedPeers) Expose(ctx context.Context, tag Tag, bufs ...[]byte) (Window, error) {
	t0 := t.rec.Now()
	w, err := t.pa.Expose(ctx, tag, bufs...)
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	t.span("expose", t0, -1, tag, n, err)
	return w, err
}

// tracedRetirer is traced over a transport that is a Retirer: Retire is
// t's own.
type tracedRetirer struct {
	*traced
	r Retirer
}

func (t *tracedRetirer) Retire(group uint64) { t.r.Retire(group) }

// tracedPeersRetirer is traced over a transport with PeerAccess that is a
// Retirer.
type tracedPeersRetirer struct {
	*tracedPeers
	r Retirer
}

func (t *tracedPeersRetirer) Retire(group uint64) { t.r.Retire(group) }
