package transporttest

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Secret returns a fresh random group secret of 32 bytes.
func Secret() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

// connectWithin bounds a group's connect: generous, for a busy host.
const connectWithin = 20 * time.Second

// ConnectGroup connects the n ranks of a group at once and returns their
// endpoints by rank: rank r's configuration is cfg(r), changed by tweak
// (if not nil). When a rank fails, it closes the others' endpoints and
// fails t.
func ConnectGroup[C any, T interface{ Close() error }](t testing.TB, n int, cfg func(rank int) C,
	tweak func(*C), connect func(context.Context, C) (T, error)) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectWithin)
	defer cancel()
	ts := make([]T, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		c := cfg(r)
		if tweak != nil {
			tweak(&c)
		}
		wg.Go(func() { ts[r], errs[r] = connect(ctx, c) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for i, tr := range ts {
				if errs[i] == nil {
					_ = tr.Close()
				}
			}
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return ts
}

// Transports returns ts as transport.Transports (a MakeFunc's result).
func Transports[T transport.Transport](ts []T) []transport.Transport {
	out := make([]transport.Transport, len(ts))
	for i, tr := range ts {
		out[i] = tr
	}
	return out
}

// RunTight runs the suite over a transport package's groups as "Default"
// and as "Tight", made by mk with tight (small limits: messages in many
// chunks, windows that run out).
func RunTight[C any](t *testing.T, mk func(tweak func(*C)) MakeFunc, tight func(*C)) {
	t.Run("Default", func(t *testing.T) { Run(t, mk(nil)) })
	t.Run("Tight", func(t *testing.T) { Run(t, mk(tight)) })
}
