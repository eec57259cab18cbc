package cluster_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// The Join tests run each rank in a process of its own (this test binary,
// run again as TestJoinRank), as a launcher would: one runtime, one
// remote, per process. (Several remotes in one process would also race in
// grpc-go: protoactor's remote Start sets grpc's process-wide logger.)

// envScenario names what a rank process does after Join.
const envScenario = "CHOREO_TEST_JOIN_SCENARIO"

// TestJoinRank is one rank's process; it is skipped unless a Join test
// started it. It joins from the environment (FromEnv) and prints "JOINED
// <group>", then "OK <what>" or "ERR <sentinel> <error>" lines.
func TestJoinRank(t *testing.T) {
	scenario := os.Getenv(envScenario)
	if scenario == "" {
		t.Skip("run by the Join tests as a rank's process")
	}
	rt := testenv.Runtime(t)
	cfg := cluster.FromEnv()
	g, err := cluster.Join(context.Background(), rt, cfg, collectives.WithTimeout(10*time.Second))
	if err != nil {
		report("join", err)
		return
	}
	defer func() { _ = g.Close() }()
	fmt.Printf("JOINED %d\n", g.ID())
	dev := testenv.Device(t)
	s, err := streams.NewGPU(rt, dev)
	if err != nil {
		t.Fatal(err)
	}
	if scenario == "allreduce-then-leave" {
		allReduceOnce(s, g, "allreduce")
		if g.Rank() == g.Size()-1 {
			_ = g.Close() // leaves; the others' next collective fails
			fmt.Println("OK left")
			return
		}
		allReduceOnce(s, g, "after-leave")
	}
}

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

// ranks runs one process per entry of envs (each with the common
// variables too) and returns each one's output lines, bounded by 60 s.
func ranks(t *testing.T, common []string, envs [][]string) [][]string {
	t.Helper()
	out := make([][]string, len(envs))
	var wg sync.WaitGroup
	for i, env := range envs {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestJoinRank$", "-test.count=1", "-test.v")
		cmd.Env = append(append(os.Environ(), common...), env...)
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				out[i] = append(out[i], sc.Text())
			}
			_ = cmd.Wait()
		}()
	}
	wg.Wait()
	for i, lines := range out {
		for _, l := range lines {
			if strings.Contains(l, "WARNING: DATA RACE") || strings.HasPrefix(l, "--- FAIL") || strings.HasPrefix(l, "panic:") {
				t.Errorf("process %d: %s:\n%s", i, l, strings.Join(lines, "\n"))
				break
			}
		}
	}
	return out
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

// TestJoinAcrossProcesses: three processes meet at the rendezvous, agree
// on a group id, and all-reduce over TCP; when the last one leaves, the
// others' next collective fails with ErrPeerLost.
func TestJoinAcrossProcesses(t *testing.T) {
	common := []string{envScenario + "=allreduce-then-leave", cluster.EnvWorldSize + "=3",
		cluster.EnvHostfile + "=" + hostfile(t, 3), secretEnv(), cluster.EnvRun + "=t1"}
	out := ranks(t, common, rankEnvs(0, 1, 2))
	var group string
	for r, lines := range out {
		g := ""
		for _, l := range lines {
			if rest, ok := strings.CutPrefix(l, "JOINED "); ok {
				g = rest
			}
		}
		if g == "" || (group != "" && g != group) {
			t.Fatalf("rank %d joined %q (rank 0: %q):\n%s", r, g, group, strings.Join(lines, "\n"))
		}
		group = g
		want := "ERR PeerLost after-leave"
		if r == 2 {
			want = "OK left"
		}
		if !has(lines, "OK allreduce") || !has(lines, want) {
			t.Fatalf("rank %d: want OK allreduce and %q:\n%s", r, want, strings.Join(lines, "\n"))
		}
	}
}

// TestJoinNamesMissingRanks: a rendezvous that cannot complete fails on
// every rank that came with ErrTimeout, naming the rank that did not. The
// join timeout, which the test waits out, is long enough for the ranks
// that come to meet on a loaded machine (with 2 s, rank 1's process
// sometimes had not reached rank 0 yet, and both were named).
func TestJoinNamesMissingRanks(t *testing.T) {
	common := []string{envScenario + "=join", cluster.EnvWorldSize + "=3",
		cluster.EnvHostfile + "=" + hostfile(t, 3), secretEnv(), cluster.EnvJoinTimeout + "=10s"}
	out := ranks(t, common, rankEnvs(0, 1)) // rank 2 never comes
	for r, lines := range out {
		if !has(lines, "ERR Timeout join") || !strings.Contains(strings.Join(lines, "\n"), "[2]") {
			t.Errorf("rank %d: want ErrTimeout naming rank [2]:\n%s\nthe other rank:\n%s", r,
				strings.Join(lines, "\n"), strings.Join(out[1-r], "\n"))
		}
	}
}

// TestJoinRefusesAnotherRun: a rank of another run is refused with
// ErrMismatch, and rank 0 gives up naming it missing. The join timeout,
// which rank 0 waits out, is long enough for rank 1 to reach rank 0 (and
// be refused) on a loaded machine rather than time out first.
func TestJoinRefusesAnotherRun(t *testing.T) {
	common := []string{envScenario + "=join", cluster.EnvWorldSize + "=2",
		cluster.EnvHostfile + "=" + hostfile(t, 2), secretEnv(), cluster.EnvJoinTimeout + "=10s"}
	envs := rankEnvs(0, 1)
	envs[0] = append(envs[0], cluster.EnvRun+"=this")
	envs[1] = append(envs[1], cluster.EnvRun+"=stale")
	out := ranks(t, common, envs)
	if !has(out[1], "ERR Mismatch join") || !strings.Contains(strings.Join(out[1], "\n"), `run "stale"`) {
		t.Errorf("rank 1: want ErrMismatch naming the run:\n%s", strings.Join(out[1], "\n"))
	}
	if !has(out[0], "ERR Timeout join") {
		t.Errorf("rank 0: want ErrTimeout:\n%s", strings.Join(out[0], "\n"))
	}
}

// TestJoinByCoordinator: with only rank 0's address (torchrun's
// MASTER_ADDR:MASTER_PORT), the other ranks listen on free ports.
func TestJoinByCoordinator(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	common := []string{envScenario + "=allreduce-then-leave", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
		"MASTER_PORT=" + strconv.Itoa(port), secretEnv()}
	out := ranks(t, common, [][]string{{"RANK=0"}, {"RANK=1"}})
	for r, lines := range out {
		if !has(lines, "OK allreduce") {
			t.Errorf("rank %d:\n%s", r, strings.Join(lines, "\n"))
		}
	}
}

// TestJoinChecksItsConfiguration: a configuration that cannot work fails
// at once with ErrBadArgument.
func TestJoinChecksItsConfiguration(t *testing.T) {
	rt := testenv.Runtime(t)
	secret := []byte("0123456789abcdef")
	for _, c := range []cluster.JoinConfig{
		{Rank: 0, Size: 2, Hosts: []string{"a:1"}, Secret: secret},
		{Rank: 2, Size: 2, Coordinator: "a:1", Secret: secret},
		{Rank: 0, Size: 2, Coordinator: "a:1", Secret: []byte("short")},
		{Rank: 0, Size: 2, Secret: secret},
		{Err: fmt.Errorf("from env: %w", collectives.ErrBadArgument)},
	} {
		if _, err := cluster.Join(context.Background(), rt, c); !errors.Is(err, collectives.ErrBadArgument) {
			t.Errorf("%+v: %v, want ErrBadArgument", c, err)
		}
	}
	if _, err := cluster.Join(context.Background(), nil, cluster.JoinConfig{Rank: 0, Size: 1,
		Coordinator: "a:1", Secret: secret}); !errors.Is(err, collectives.ErrBadArgument) {
		t.Errorf("nil runtime: %v", err)
	}
}
