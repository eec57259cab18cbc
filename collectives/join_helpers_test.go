package collectives_test

// The helpers of the tests whose ranks join a group across processes
// (cluster.Join) from this package's test binary.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// allReduceOnce all-reduces rank-dependent values, checks them, and
// reports.
func allReduceOnce(s *streams.GPU, g *collectives.Group, what string) {
	const n = 100_000
	x, err := array.Full(s, []int{n}, gpu.Float32, float64(g.Rank()+1))
	if err != nil {
		report(what, err)
		return
	}
	y, err := g.AllReduce(s, x, collectives.Sum)
	if err != nil {
		report(what, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := array.ToSlice[float32](ctx, y)
	if err != nil {
		report(what, err)
		return
	}
	want := float32(g.Size() * (g.Size() + 1) / 2)
	for i, v := range got {
		if v != want {
			report(what, fmt.Errorf("element %d: %v, want %v", i, v, want))
			return
		}
	}
	fmt.Println("OK", what)
}

// report prints an error with the name of the sentinel it matches.
func report(what string, err error) {
	name := "other"
	for _, s := range []struct {
		name string
		err  error
	}{{"PeerLost", collectives.ErrPeerLost}, {"Timeout", collectives.ErrTimeout},
		{"ShapeMismatch", collectives.ErrShapeMismatch}, {"Mismatch", collectives.ErrMismatch},
		{"BadArgument", collectives.ErrBadArgument}, {"Closed", collectives.ErrClosed}} {
		if errors.Is(err, s.err) {
			name = s.name
			break
		}
	}
	fmt.Printf("ERR %s %s: %v\n", name, what, err)
}

// hostfile writes n free loopback addresses as a hostfile.
func hostfile(t *testing.T, n int) string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = l.Addr().String()
		_ = l.Close()
	}
	b, _ := json.Marshal(addrs)
	p := t.TempDir() + "/hosts.json"
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// secretEnv is CHOREO_SECRET set to a fresh random secret.
func secretEnv() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return cluster.EnvSecret + "=" + hex.EncodeToString(b)
}

// rankEnvs is CHOREO_RANK=r for each of ranks.
func rankEnvs(ranks ...int) [][]string {
	out := make([][]string, len(ranks))
	for i, r := range ranks {
		out[i] = []string{cluster.EnvRank + "=" + strconv.Itoa(r)}
	}
	return out
}

// has reports whether lines hold one starting with prefix.
func has(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
