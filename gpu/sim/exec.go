package sim

import (
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/gpu"
)

// checkOwned verifies, after gpu.ValidateBatch, that the batch names only
// buffers and words of this device, still live unless freedOK (a batch of
// units: a freed object fails its unit when it runs), and only command
// types the sim knows. Errors wrap gpu.ErrBadArgument (foreign object or
// unknown command) or gpu.ErrClosed (freed object).
func (q *queue) checkOwned(cmds []gpu.Command, freedOK bool) error {
	for i, c := range cmds {
		var err error
		switch c := c.(type) {
		case gpu.Fill:
			err = q.ownBuffer(c.Dst, "dst")
		case gpu.Arange:
			err = q.ownBuffer(c.Dst, "dst")
		case gpu.Copy:
			err = q.ownBuffers(c.Dst, "dst", c.Src, "src", nil, "")
		case gpu.Add:
			err = q.ownBuffers(c.Dst, "dst", c.A, "a", c.B, "b")
		case gpu.Scale:
			err = q.ownBuffers(c.Dst, "dst", c.Src, "src", nil, "")
		case gpu.WaitValue:
			err = q.ownWord(c.Word)
		case gpu.WriteValue:
			err = q.ownWord(c.Word)
		case gpu.PeerReduce:
			if t, ok := c.Table.(*peerTable); !ok || t.dev != q.dev {
				err = fmt.Errorf("peer table is a %T of another device: %w", c.Table, gpu.ErrBadArgument)
			}
		default:
			err = fmt.Errorf("unknown command type: %w", gpu.ErrBadArgument)
		}
		if err != nil && !(freedOK && errors.Is(err, gpu.ErrClosed)) {
			return fmt.Errorf("sim: submit: %s: command %d: %w", gpu.Name(c), i, err)
		}
	}
	return nil
}

// ownBuffers checks every buffer's owner before any buffer's liveness, so
// that a freed buffer (which a batch of units accepts) never hides a
// foreign one.
func (q *queue) ownBuffers(b1 gpu.Buffer, n1 string, b2 gpu.Buffer, n2 string, b3 gpu.Buffer, n3 string) error {
	bufs := [3]gpu.Buffer{b1, b2, b3}
	names := [3]string{n1, n2, n3}
	for i, b := range bufs {
		if b == nil { // b3 unused
			continue
		}
		if err := q.foreignBuffer(b, names[i]); err != nil {
			return err
		}
	}
	for i, b := range bufs {
		if b != nil && b.(*buffer).freed.Load() {
			return fmt.Errorf("%s buffer freed: %w", names[i], gpu.ErrClosed)
		}
	}
	return nil
}

func (q *queue) ownBuffer(b gpu.Buffer, name string) error {
	if err := q.foreignBuffer(b, name); err != nil {
		return err
	}
	if b.(*buffer).freed.Load() {
		return fmt.Errorf("%s buffer freed: %w", name, gpu.ErrClosed)
	}
	return nil
}

// foreignBuffer fails unless b is a buffer of this device.
func (q *queue) foreignBuffer(b gpu.Buffer, name string) error {
	sb, ok := b.(*buffer)
	if !ok {
		return fmt.Errorf("%s buffer is a %T, not a sim buffer: %w", name, b, gpu.ErrBadArgument)
	}
	if sb.dev != q.dev {
		return fmt.Errorf("%s buffer belongs to another device: %w", name, gpu.ErrBadArgument)
	}
	return nil
}

func (q *queue) ownWord(fw gpu.FenceWord) error {
	w, ok := fw.(*word)
	if !ok {
		return fmt.Errorf("fence word is a %T, not a sim word: %w", fw, gpu.ErrBadArgument)
	}
	if w.dev != q.dev {
		return fmt.Errorf("fence word belongs to another device: %w", gpu.ErrBadArgument)
	}
	if w.freed.Load() {
		return fmt.Errorf("fence word freed: %w", gpu.ErrClosed)
	}
	return nil
}

// live returns the memory of a buffer checked by checkOwned, or an error
// wrapping gpu.ErrClosed if it was freed since.
func live(b gpu.Buffer, name string) ([]byte, error) {
	sb := b.(*buffer)
	if sb.freed.Load() {
		return nil, fmt.Errorf("%s buffer freed: %w", name, gpu.ErrClosed)
	}
	return sb.data, nil
}

// exec1 runs one command that checkOwned accepted. A panic in a kernel (a
// bug the validation missed) fails the command instead of the process.
func (q *queue) exec1(i int, c gpu.Command) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kernel panicked: %v: %w", r, gpu.ErrBadArgument)
		}
	}()
	switch c := c.(type) {
	case gpu.Fill:
		dst, err := live(c.Dst, "dst")
		if err != nil {
			return err
		}
		fill(c.DType, dst, c.N, c.Value)
	case gpu.Arange:
		dst, err := live(c.Dst, "dst")
		if err != nil {
			return err
		}
		arange(c.DType, dst, c.N, c.Start, c.Step)
	case gpu.Copy:
		dst, err := live(c.Dst, "dst")
		if err != nil {
			return err
		}
		src, err := live(c.Src, "src")
		if err != nil {
			return err
		}
		copy(dst[c.DstOff:c.DstOff+c.Bytes], src[c.SrcOff:c.SrcOff+c.Bytes])
	case gpu.Add:
		dst, err := live(c.Dst, "dst")
		if err != nil {
			return err
		}
		a, err := live(c.A, "a")
		if err != nil {
			return err
		}
		b, err := live(c.B, "b")
		if err != nil {
			return err
		}
		add(c.DType, dst, a, b, c.N)
	case gpu.Scale:
		dst, err := live(c.Dst, "dst")
		if err != nil {
			return err
		}
		src, err := live(c.Src, "src")
		if err != nil {
			return err
		}
		scale(c.DType, dst, src, c.N, c.Factor)
	case gpu.WaitValue: // run.step decides waits before it calls exec1
	case gpu.WriteValue:
		w := c.Word.(*word)
		if w.freed.Load() {
			return fmt.Errorf("fence word freed: %w", gpu.ErrClosed)
		}
		w.raise(c.Value, false)
	case gpu.PeerReduce:
		return q.peerReduce(c)
	}
	return nil
}

// waitValue decides a WaitValue at command i without blocking: passed
// (false, nil) once w >= v; failed with ErrClosed if the word is freed or
// the queue is aborted (Close past its deadline), also when the abort's
// StopValue is what satisfied the wait, so a batch cut short never reports
// success; otherwise (true, nil): the batch suspends on the word (see run).
func (q *queue) waitValue(i int, w *word, v uint32) (suspend bool, err error) {
	q.waitAt.Store(int64(i))
	switch {
	case q.aborted.Load():
		return false, fmt.Errorf("queue closed while waiting for %d (word at %d): %w", v, w.v.Load(), gpu.ErrClosed)
	case w.reached(v):
		q.waitAt.Store(int64(i) + 1)
		return false, nil
	case w.freed.Load():
		return false, fmt.Errorf("fence word freed while waiting for %d: %w", v, gpu.ErrClosed)
	}
	return true, nil
}
