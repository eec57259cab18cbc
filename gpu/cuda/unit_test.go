package cuda

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Tests of the backend's pure-Go parts; they run on any machine.

func TestBackoffSpinsThenSleeps(t *testing.T) {
	var b backoff
	start := time.Now()
	for b.next() == 0 {
		if time.Since(start) > time.Second {
			t.Fatal("backoff still spinning after 1s")
		}
	}
	prev := minSleep
	for range 20 {
		d := b.next()
		if d < prev || d > maxSleep {
			t.Fatalf("sleep %v after %v: want doubling up to %v", d, prev, maxSleep)
		}
		prev = d
	}
	if prev != maxSleep {
		t.Errorf("sleep settled at %v, want %v", prev, maxSleep)
	}
}

func TestPollWaitBounds(t *testing.T) {
	errCtx, errCancel := errors.New("ctx"), errors.New("cancel")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	never := func() (bool, error) { return false, nil }
	if err := pollWait(ctx, nil, never, func() error { return errCtx }, nil); err != errCtx {
		t.Errorf("ctx expiry: %v", err)
	}
	c := make(chan struct{})
	time.AfterFunc(5*time.Millisecond, func() { close(c) })
	if err := pollWait(context.Background(), c, never, nil, func() error { return errCancel }); err != errCancel {
		t.Errorf("cancel: %v", err)
	}
	n := 0
	if err := pollWait(context.Background(), nil, func() (bool, error) { n++; return n > 1000, nil }, nil, nil); err != nil || n != 1001 {
		t.Errorf("condition: err %v after %d polls", err, n)
	}
}
