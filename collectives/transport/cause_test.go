package transport_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/errs"
)

// A cause's sentinels survive CodeOf and RemoteCause, the others do not
// appear, and the text is kept.
func TestCauseCodeRoundTrip(t *testing.T) {
	all := []error{errs.ErrClosed, errs.ErrTimeout, errs.ErrPeerLost, errs.ErrAborted, errs.ErrBadArgument,
		errs.ErrMismatch, errs.ErrShapeMismatch, errs.ErrTooLarge, transport.ErrSizeMismatch, transport.ErrBadPeer,
		context.Canceled, context.DeadlineExceeded}
	for i, s := range all {
		cause := fmt.Errorf("rank 3: step %d: %w", i, s)
		got := transport.RemoteCause(transport.CodeOf(cause), cause.Error())
		if got.Error() != cause.Error() {
			t.Errorf("text %q, want %q", got, cause)
		}
		for _, o := range all {
			if errors.Is(got, o) != (o == s) {
				t.Errorf("cause wrapping %v: errors.Is(_, %v) = %v", s, o, !(o == s))
			}
		}
	}
	shape := fmt.Errorf("count 7 vs 8: %w: %w", errs.ErrShapeMismatch, errs.ErrMismatch)
	if c := transport.CodeOf(shape); c != transport.CauseShapeMismatch|transport.CauseMismatch {
		t.Errorf("CodeOf(shape mismatch) = %#x", c)
	}
	if transport.CodeOf(nil) != 0 || transport.CodeOf(errors.New("plain")) != 0 {
		t.Error("a cause without sentinels has a code")
	}
	// Unknown bits (a newer peer's) match nothing.
	if errors.Is(transport.RemoteCause(1<<31, "x"), errs.ErrClosed) {
		t.Error("an unknown bit matched")
	}
	// Inside an AbortError the sentinels are found through the cause.
	ae := &transport.AbortError{Origin: 1, Cause: transport.RemoteCause(transport.CodeOf(shape), shape.Error())}
	if !errors.Is(ae, transport.ErrAborted) || !errors.Is(ae, errs.ErrShapeMismatch) {
		t.Errorf("%v", ae)
	}
}
