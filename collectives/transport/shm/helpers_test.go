package shm

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// testSecret is the secret of the groups the tests build.
var testSecret = func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}()

var runs atomic.Uint64

// testRun returns a run name no other test of this process uses.
func testRun(t testing.TB) string {
	return fmt.Sprintf("test-%d-%d-%d", time.Now().UnixNano()%1e9, runs.Add(1), len(t.Name()))
}

// needShm skips a test where the transport does not work.
func needShm(t testing.TB) {
	t.Helper()
	if err := supported(); err != nil {
		t.Skip(err)
	}
}

// build connects n ranks of a fresh run, each configured by tweak (which
// may be nil), and returns them indexed by rank.
func build(t testing.TB, n int, tweak func(*Config)) []*Transport {
	t.Helper()
	needShm(t)
	run := testRun(t)
	ts := make([]*Transport, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range n {
		cfg := Config{Rank: r, Size: n, Group: 77, Run: run, Secret: testSecret}
		if tweak != nil {
			tweak(&cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = Connect(ctx, cfg)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			closeAll(ts)
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return ts
}

func closeAll(ts []*Transport) {
	for _, tr := range ts {
		if tr != nil {
			_ = tr.Close()
		}
	}
}

func asTransports(ts []*Transport) []transport.Transport {
	out := make([]transport.Transport, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}
