package msg

import "fmt"

const (
	sinkDiscard = iota
	sinkBuf     // m.data: an eager message no Recv waits for yet
	sinkMsg     // m.op's buffer: a message going straight into its Recv
)

// Sink is where one inbound frame's payload goes: a Recv's buffer, a
// buffer for a message no Recv waits for yet, or nowhere.
//
// A link asks Take for where the next bytes go (at most n bytes; nil:
// read and drop n), writes them there without any lock held, says how
// many with Put, and repeats until the payload is in (Copy does all that
// for a payload in memory); then it calls Done. A Recv that must end
// between Take and Put wakes the lane and ends at Put.
type Sink struct {
	p    *Peer
	m    *inMsg
	kind int
	off  int // the next byte's offset in the message
	end  int // the frame's end offset in the message
	r    *op // the Recv busy between Take and Put
}

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
	case s.kind == sinkBuf && (p.e.retired.Has(m.tag.Group) || p.e.aborts.Of(m.tag) != nil):
		p.consumed(m.cost)
		p.putEager(m)
	case s.kind == sinkBuf:
		q := p.queue(m.tag)
		q.arrived = append(q.arrived, m)
		p.match(m.tag, q)
	case m.eager:
		p.consumed(m.cost)
		if q := p.complete(m); q != nil {
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
