package algo

import (
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/gpu"
)

// Steps of the recursive doubling.
const (
	stepFoldIn  = stepData + 16 // extra rank -> its partner, before
	stepDouble  = stepData + 17 // + round: the exchanges
	stepFoldOut = stepData + 80 // partner -> extra rank, after
)

// doubling all-reduces buf (holding this rank's input; the result replaces
// it) by recursive doubling: log2(p) exchanges of the whole buffer, p the
// largest power of two <= n. With n not a power of two, the first 2(n-p)
// ranks pair up: the even one hands its data to the odd one before and gets
// the result back after (two extra steps on those ranks only). Every rank
// ends with bitwise the same result: each exchange combines the same two
// values on both partners, and the ops are commutative.
func (c *coll) doubling(dt gpu.DType, buf []byte) error {
	n, r := c.n, c.rank
	if n == 1 {
		return nil
	}
	p := 1
	for p*2 <= n {
		p *= 2
	}
	rem := n - p
	scratch := getScratch(len(buf))
	defer putScratch(scratch)

	if r < 2*rem && r%2 == 0 { // extra: fold in, wait for the result
		if err := c.t.Send(c.ctx, r+1, c.tag(stepFoldIn), buf); err != nil {
			return err
		}
		return c.t.Recv(c.ctx, r+1, c.tag(stepFoldOut), buf)
	}
	if r < 2*rem {
		if err := c.t.Recv(c.ctx, r-1, c.tag(stepFoldIn), scratch); err != nil {
			return err
		}
		if err := reduce.Into(c.d.Op, dt, buf, scratch); err != nil {
			return err
		}
	}
	nr := r - rem
	if r < 2*rem {
		nr = r / 2
	}
	real := func(v int) int {
		if v < rem {
			return 2*v + 1
		}
		return v + rem
	}
	for k, mask := 0, 1; mask < p; k, mask = k+1, mask<<1 {
		peer := real(nr ^ mask)
		if err := c.exchange(c.ctx, stepDouble+uint32(k), peer, buf, peer, scratch); err != nil {
			return err
		}
		// Both partners compute lower op upper, in that order: floats are
		// not bitwise commutative (Min/Max of +0 and -0, NaN payloads), and
		// every rank must get the same bits.
		if nr&mask == 0 {
			if err := reduce.Into(c.d.Op, dt, buf, scratch); err != nil {
				return err
			}
			continue
		}
		if err := reduce.Into(c.d.Op, dt, scratch, buf); err != nil {
			return err
		}
		copy(buf, scratch)
	}
	if r < 2*rem {
		return c.t.Send(c.ctx, r-1, c.tag(stepFoldOut), buf)
	}
	return nil
}
