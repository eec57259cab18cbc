package metal

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

func TestPollUntilReturnsWhenTheConditionHolds(t *testing.T) {
	var v atomic.Uint32
	go func() {
		time.Sleep(20 * time.Millisecond)
		v.Store(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := pollUntil(ctx, nil, "test", func() (bool, error) { return v.Load() == 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Errorf("returned after %v, before the condition held", d)
	}
}

func TestPollUntilIsBoundedByContextAndCancel(t *testing.T) {
	never := func() (bool, error) { return false, nil }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := pollUntil(ctx, nil, "test", never); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	stop := make(chan struct{})
	time.AfterFunc(20*time.Millisecond, func() { close(stop) })
	if err := pollUntil(context.Background(), stop, "test", never); !errors.Is(err, gpu.ErrCanceled) {
		t.Errorf("cancel: %v", err)
	}
	boom := errors.New("boom")
	if err := pollUntil(context.Background(), nil, "test", func() (bool, error) { return false, boom }); err != boom {
		t.Errorf("condition error: %v", err)
	}
	// Already true: nil even with ctx and cancel already done.
	done, c := context.WithCancel(context.Background())
	c()
	if err := pollUntil(done, stop, "test", func() (bool, error) { return true, nil }); err != nil {
		t.Errorf("already true: %v", err)
	}
}
