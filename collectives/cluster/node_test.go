package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/internal/errs"
)

// The Node tests run the peer rank in a process of its own (this test
// binary again, as TestNodePeerProcess): protoactor's remote Start sets
// grpc-go's process-wide logger, so two remotes in one process race.

const (
	envPeer    = "CHOREO_TEST_NODE_PEER" // the peer's spec, as JSON
	testSecret = "0123456789abcdef0123"
)

// peerSpec is what the peer process is told.
type peerSpec struct {
	Spec
	Listen string
	Secret string // default testSecret
	Watch  bool   // watch the peers after the roster, printing "LOST <rank> <cause>"
	// Wait bounds the rendezvous; default 20 s.
	Wait time.Duration
}

// TestNodePeerProcess is the peer rank: it starts its remote and Node,
// joins the rendezvous, prints "ROSTER <group>" (or "FAILED <error>"),
// then waits to be killed (bounded).
func TestNodePeerProcess(t *testing.T) {
	raw := os.Getenv(envPeer)
	if raw == "" {
		t.Skip("run by the Node tests as the peer's process")
	}
	var ps peerSpec
	if err := json.Unmarshal([]byte(raw), &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Secret == "" {
		ps.Secret = testSecret
	}
	rt, err := remoteRuntime(remoting.Config{Addr: ps.Listen, Secret: []byte(ps.Secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	n, err := Start(rt, ps.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Wait == 0 {
		ps.Wait = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), ps.Wait)
	defer cancel()
	r, err := n.Rendezvous(ctx)
	if err != nil {
		os.Stdout.WriteString("FAILED " + err.Error() + "\n")
		return
	}
	os.Stdout.WriteString("ROSTER " + strconv.FormatUint(r.Group, 10) + "\n")
	if ps.Watch {
		n.Watch(r, func(rank int, cause error) { os.Stdout.WriteString(fmt.Sprintf("LOST %d %v\n", rank, cause)) })
	}
	time.Sleep(30 * time.Second)
}

// startPeer starts the peer process and returns it with a channel of its
// output lines.
func startPeer(t *testing.T, ps peerSpec) (*exec.Cmd, <-chan string) {
	t.Helper()
	return startChild(t, "TestNodePeerProcess", envPeer, ps)
}

// startChild runs this test binary again as the test named, with env set
// to plan in JSON, and returns the process with a channel of its output
// lines (closed when it ends); the process is killed when t ends.
func startChild(t *testing.T, test, env string, plan any) (*exec.Cmd, <-chan string) {
	t.Helper()
	b, _ := json.Marshal(plan)
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// shared is this test process's one remoting runtime (see above); the
// tests run a Node on it one at a time.
var shared struct {
	once sync.Once
	rt   *actors.Runtime
	err  error
}

// remoteRuntime is a runtime with its remoting started by cfg.
func remoteRuntime(cfg remoting.Config) (*actors.Runtime, error) {
	rt, err := actors.NewRuntime()
	if err != nil {
		return nil, err
	}
	if _, err := remoting.Start(rt, cfg); err != nil {
		_ = rt.Close()
		return nil, err
	}
	return rt, nil
}

func sharedRuntime(t *testing.T) *actors.Runtime {
	t.Helper()
	shared.once.Do(func() {
		shared.rt, shared.err = remoteRuntime(remoting.Config{Addr: "127.0.0.1:0", Secret: []byte(testSecret)})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.rt
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.rt != nil {
		_ = shared.rt.Close()
	}
	os.Exit(code)
}

// TestNodeRendezvousAndWatch: rank 0 here and rank 1 in another process
// meet and agree on a group; when rank 1's process is killed, rank 0's
// watch reports it lost through the control plane alone (no data plane
// runs here).
func TestNodeRendezvousAndWatch(t *testing.T) {
	rt := sharedRuntime(t)
	coord := remoting.Of(rt).Address()
	n, err := Start(rt, Spec{Rank: 0, Size: 2, Run: "r", Coordinator: coord, Data: "d0:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close("test over")
	if _, err := Start(rt, Spec{Rank: 0, Size: 2}); err == nil {
		t.Fatal("a second Node on one runtime was started")
	}
	peer, lines := startPeer(t, peerSpec{Spec: Spec{Rank: 1, Size: 2, Run: "r", Coordinator: coord, Data: "d1:1"},
		Listen: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	roster, err := n.Rendezvous(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := roster.DataAddrs(); got[0] != "d0:1" || got[1] != "d1:1" || roster.Group == 0 {
		t.Fatalf("roster %v: %v", roster, got)
	}
	var peerGroup string
	for l := range lines {
		if g, ok := strings.CutPrefix(l, "ROSTER "); ok {
			peerGroup = g
			break
		}
	}
	if peerGroup != strconv.FormatUint(roster.Group, 10) {
		t.Fatalf("the peer's group %q, rank 0's %d", peerGroup, roster.Group)
	}
	lost := make(chan error, 2)
	n.Watch(roster, func(rank int, cause error) {
		if rank != 1 {
			cause = errors.New("wrong rank reported")
		}
		lost <- cause
	})
	time.Sleep(200 * time.Millisecond) // let the watch reach the peer; the test holds either way
	killed := time.Now()
	_ = peer.Process.Kill()
	select {
	case cause := <-lost:
		// Named by whichever sign came first: the end of the watch of its
		// Node, or the dial of its address that the suspicion makes.
		if msg := cause.Error(); !strings.Contains(msg, "rank 1's node") && !strings.Contains(msg, "rank 1's address") {
			t.Fatalf("cause %v", cause)
		}
		t.Logf("rank 1 reported lost %v after the kill: %v", time.Since(killed).Round(time.Millisecond), cause)
	case <-time.After(20 * time.Second):
		t.Fatal("rank 1's death was not reported")
	}
}

// TestRendezvousTimesOutNamingMissing: rank 0 alone gives up at its
// deadline with ErrTimeout naming the ranks that never came.
func TestRendezvousTimesOutNamingMissing(t *testing.T) {
	rt := sharedRuntime(t)
	n, err := Start(rt, Spec{Rank: 0, Size: 3, Coordinator: remoting.Of(rt).Address()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close("test over")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = n.Rendezvous(ctx)
	if !errors.Is(err, errs.ErrTimeout) || !strings.Contains(err.Error(), "[1 2]") {
		t.Fatalf("%v, want ErrTimeout naming [1 2]", err)
	}
	if _, err := Start(nil, Spec{Rank: 0, Size: 1}); !errors.Is(err, errs.ErrBadArgument) {
		t.Fatalf("nil runtime: %v", err)
	}
}
