//go:build darwin

package metal

import (
	"errors"
	"fmt"
	"math"

	"github.com/choreo-gpu/choreo/gpu"
)

// checkOwned verifies, after gpu.ValidateBatch, that the batch names only
// live buffers and words of this device, that element counts fit the
// kernels' 32-bit counts, and returns the words its WaitValues name.
// Errors wrap gpu.ErrBadArgument (foreign object, count too large, unknown
// command) or gpu.ErrClosed (freed object).
func (q *queue) checkOwned(cmds []gpu.Command, freedOK bool) ([]fenceWord, error) {
	var words []fenceWord
	for i, c := range cmds {
		var err error
		switch c := c.(type) {
		case gpu.Fill:
			err = q.checkBuffers(c.N, c.Dst)
		case gpu.Arange:
			err = q.checkBuffers(c.N, c.Dst)
		case gpu.Copy:
			err = q.checkBuffers(c.Bytes/copyElemSize(c), c.Dst, c.Src)
		case gpu.Add:
			err = q.checkBuffers(c.N, c.Dst, c.A, c.B)
		case gpu.Scale:
			err = q.checkBuffers(c.N, c.Dst, c.Src)
		case gpu.WaitValue:
			var w fenceWord
			if w, err = q.checkWord(c.Word); err == nil {
				words = append(words, w)
			}
		case gpu.WriteValue:
			_, err = q.checkWord(c.Word)
		default:
			err = fmt.Errorf("unknown command type %T: %w", c, gpu.ErrBadArgument)
		}
		if err != nil && !(freedOK && errors.Is(err, gpu.ErrClosed)) {
			return nil, fmt.Errorf("metal: submit: command %d %v: %w", i, c, err)
		}
	}
	return words, nil
}

func (q *queue) checkBuffers(n int, bufs ...gpu.Buffer) error {
	if n > math.MaxUint32 {
		return fmt.Errorf("%d elements, kernels take at most 2^32-1: %w", n, gpu.ErrBadArgument)
	}
	for _, b := range bufs {
		if mb, ok := b.(*buffer); !ok || mb.dev != q.dev {
			return fmt.Errorf("buffer %T is not from this metal device: %w", b, gpu.ErrBadArgument)
		}
	}
	// Liveness second, so that a freed buffer never hides a foreign one.
	for _, b := range bufs {
		if !b.(*buffer).live() {
			return fmt.Errorf("buffer was freed: %w", gpu.ErrClosed)
		}
	}
	return nil
}

func (q *queue) checkWord(w gpu.FenceWord) (fenceWord, error) {
	fw, ok := w.(fenceWord)
	if !ok || fw.owner() != q.dev {
		return nil, fmt.Errorf("fence word %T is not from this metal device: %w", w, gpu.ErrBadArgument)
	}
	if !fw.live() {
		return nil, fmt.Errorf("fence word was freed: %w", gpu.ErrClosed)
	}
	return fw, nil
}
