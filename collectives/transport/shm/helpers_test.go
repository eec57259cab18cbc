package shm

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// testSecret is the secret of the groups the tests build.
var testSecret = transporttest.Secret()

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
	cfg := func(r int) Config { return Config{Rank: r, Size: n, Group: 77, Run: run, Secret: testSecret} }
	return transporttest.ConnectGroup(t, n, cfg, tweak, Connect)
}

// asMake is build as the conformance suite's MakeFunc.
func asMake(tweak func(*Config)) transporttest.MakeFunc {
	return func(t *testing.T, n int) []transport.Transport { return asTransports(build(t, n, tweak)) }
}

func closeAll(ts []*Transport) {
	for _, tr := range ts {
		if tr != nil {
			_ = tr.Close()
		}
	}
}

func asTransports(ts []*Transport) []transport.Transport { return transporttest.Transports(ts) }
