package spin

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilSeesReadiness(t *testing.T) {
	var flag atomic.Bool
	go func() {
		time.Sleep(time.Millisecond)
		flag.Store(true)
	}()
	if !Until(5*time.Second, flag.Load) {
		t.Fatal("Until returned false although ready became true within its budget")
	}
}

func TestUntilGivesUp(t *testing.T) {
	start := time.Now()
	if Until(200*time.Microsecond, func() bool { return false }) {
		t.Fatal("Until reported ready for a condition that never holds")
	}
	if el := time.Since(start); el < 200*time.Microsecond || el > time.Second {
		t.Fatalf("Until gave up after %v, want about 200us", el)
	}
	calls := 0
	if Until(0, func() bool { calls++; return false }) || calls != 1 {
		t.Fatalf("Until(0) polled %d times, want a single look", calls)
	}
}

func TestPolicyCountsItsPolls(t *testing.T) {
	calls := 0
	p := Policy{Polls: 16, Yields: 4}
	if p.Until(func() bool { calls++; return false }) || calls != 20 {
		t.Fatalf("Policy{Polls: 16, Yields: 4} polled %d times, want 20", calls)
	}
	calls = 0
	if !p.Until(func() bool { calls++; return calls == 18 }) || calls != 18 {
		t.Fatalf("Until went on after ready reported true (%d polls)", calls)
	}
}

func TestBackoffSleepsDoubling(t *testing.T) {
	b := Policy{Polls: 2, Yields: 1, Sleep: 4 * time.Microsecond, MaxSleep: 20 * time.Microsecond}.Backoff()
	var got []time.Duration
	for range 7 {
		got = append(got, b.Next())
	}
	us := time.Microsecond
	want := []time.Duration{0, 0, 4 * us, 8 * us, 16 * us, 20 * us, 20 * us}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Next returned %v, want %v", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != 0 {
		t.Fatalf("after Reset Next returned %v, want 0 (polling again)", d)
	}
	if d := (Policy{}).Backoff(); d.Next() != Park {
		t.Fatal("a Policy without sleeps does not end in Park")
	}
}

func TestBackoffSpinsForItsBudget(t *testing.T) {
	b := Policy{Spin: 200 * time.Microsecond, Alone: time.Hour, Sleep: time.Millisecond}.Backoff()
	start := time.Now()
	for b.Next() == 0 {
	}
	if el := time.Since(start); el < 200*time.Microsecond || el > time.Second {
		t.Fatalf("the spin ended after %v, want about 200us", el)
	}
}

func TestWait(t *testing.T) {
	p := Policy{Spin: 20 * time.Microsecond, Sleep: time.Microsecond, MaxSleep: 100 * time.Microsecond}
	stopped := func(canceled bool) error {
		if canceled {
			return errors.New("canceled")
		}
		return errors.New("ctx")
	}
	ctx := context.Background()
	var flag atomic.Bool
	go func() {
		time.Sleep(time.Millisecond)
		flag.Store(true)
	}()
	if err := p.Wait(ctx, nil, func() (bool, error) { return flag.Load(), nil }, stopped); err != nil {
		t.Fatalf("Wait for a condition that comes true: %v", err)
	}
	boom := errors.New("boom")
	if err := p.Wait(ctx, nil, func() (bool, error) { return false, boom }, stopped); err != boom {
		t.Fatalf("Wait returned %v, want cond's error", err)
	}
	never := func() (bool, error) { return false, nil }
	short, cancelCtx := context.WithTimeout(ctx, time.Millisecond)
	defer cancelCtx()
	if err := p.Wait(short, nil, never, stopped); err == nil || err.Error() != "ctx" {
		t.Fatalf("Wait past ctx returned %v, want stopped(false)", err)
	}
	cancel := make(chan struct{})
	close(cancel)
	if err := p.Wait(ctx, cancel, never, stopped); err == nil || err.Error() != "canceled" {
		t.Fatalf("Wait after cancel returned %v, want stopped(true)", err)
	}
	looks := 0
	late := func() (bool, error) { looks++; return looks > 64, nil } // true at the last look
	if err := p.Wait(ctx, cancel, late, stopped); err != nil {
		t.Fatalf("Wait did not take the last look: %v", err)
	}
}

func TestWaitBounds(t *testing.T) {
	p := Policy{Spin: 50 * time.Microsecond, Alone: 10 * time.Microsecond, Sleep: 4 * time.Microsecond, MaxSleep: 250 * time.Microsecond}
	errCtx, errCancel := errors.New("ctx"), errors.New("cancel")
	stopped := func(canceled bool) error {
		if canceled {
			return errCancel
		}
		return errCtx
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	never := func() (bool, error) { return false, nil }
	if err := p.Wait(ctx, nil, never, stopped); err != errCtx {
		t.Errorf("ctx expiry: %v", err)
	}
	c := make(chan struct{})
	time.AfterFunc(5*time.Millisecond, func() { close(c) })
	if err := p.Wait(context.Background(), c, never, stopped); err != errCancel {
		t.Errorf("cancel: %v", err)
	}
	n := 0
	if err := p.Wait(context.Background(), nil, func() (bool, error) { n++; return n > 1000, nil }, stopped); err != nil || n != 1001 {
		t.Errorf("condition: err %v after %d polls", err, n)
	}
}
