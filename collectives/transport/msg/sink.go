package msg

import "fmt"

// Where a Sink's bytes go.
const (
	sinkDiscard = iota
	sinkBuf     // m.data: an eager message no Recv waits for yet
	sinkMsg     // m.op's buffer: a message going straight into its Recv
)

// Sink is where one inbound frame's payload goes: a Recv's buffer, a
// buffer for a message no Recv waits for yet, or nowhere.
//
// A link asks Take for where the next bytes go (a slice of at most n
// bytes; nil: read and drop n of them), writes them there without any
// lock held, says how many with Put (after a nil Take, the n dropped),
// and repeats until the payload is in; then it calls Done. Between Take and Put the Endpoint does not end the Recv
// whose buffer it is: one that must end (its context, an abort) calls
// the link's Wake(lane) and ends at Put.
type Sink struct {
	p    *Peer
	m    *inMsg
	kind int
	off  int // the next byte's offset in the message
	end  int // the frame's end offset in the message
	r    *op // the Recv busy between Take and Put
}

// discard is the Sink of payloads nothing takes.
var discard = Sink{kind: sinkDiscard}

// Take returns where the next at most n bytes go.
func (s *Sink) Take(n int) []byte {
	n = min(n, s.end-s.off)
	switch s.kind {
	case sinkBuf:
		return s.m.data[s.off : s.off+n]
	case sinkMsg:
		p := s.p
		p.mu.Lock()
		defer p.mu.Unlock()
		r := s.m.op
		if r == nil || r.busy || p.lost != nil {
			return nil
		}
		r.busy = true
		s.r = r
		return r.buf[s.off : s.off+n]
	}
	return nil
}

// Put says k bytes were written into what Take returned.
func (s *Sink) Put(k int) {
	switch s.kind {
	case sinkBuf:
		s.off += k
	case sinkMsg:
		p := s.p
		p.mu.Lock()
		defer p.mu.Unlock()
		s.off += k
		s.m.got += k
		if r := s.r; r != nil {
			s.r = nil
			r.busy = false
			if r.stop != nil {
				stop := r.stop
				r.stop = nil
				p.end(r, stop)
			}
		}
	}
}

// Copy takes p whole: Take, copy and Put until every byte is in (or
// dropped).
func (s *Sink) Copy(p []byte) {
	for len(p) > 0 {
		n := len(p)
		if dst := s.Take(n); len(dst) > 0 {
			n = copy(dst, p)
		}
		s.Put(n)
		p = p[n:]
	}
}

// Done says the payload is whole.
func (s *Sink) Done() error {
	if s.kind == sinkDiscard {
		return nil
	}
	if s.off != s.end {
		return fmt.Errorf("a payload ended after %d of %d bytes", s.off, s.end)
	}
	p := s.p
	m := s.m
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return nil
	}
	switch {
	case s.kind == sinkBuf && p.e.aborts.Of(m.tag) != nil:
		p.consumed(m.cost)
		p.putEager(m)
	case s.kind == sinkBuf:
		q := p.queue(m.tag)
		q.arrived = append(q.arrived, m)
		p.match(m.tag, q)
	case m.eager:
		p.consumed(m.cost)
		if r := m.op; r != nil {
			p.end(r, nil)
		}
		if q := p.queues[m.tag]; q != nil && q.active == m {
			q.active = nil
			p.match(m.tag, q)
		}
		p.putEager(m) // s is m's: the link leaves it after Done
	case m.got == m.size:
		if q := p.complete(m); q != nil {
			p.match(m.tag, q)
		}
	}
	return nil
}
