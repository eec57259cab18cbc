package shm

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// The process tests run ranks in processes of their own (this test
// binary, run again as TestRankProcess), as a launcher would, and kill
// them outright.

// Variables of a rank's process.
const (
	envScenario = "CHOREO_SHM_TEST_SCENARIO"
	envRank     = "CHOREO_SHM_TEST_RANK"
	envSize     = "CHOREO_SHM_TEST_SIZE"
	envRun      = "CHOREO_SHM_TEST_RUN"
	envSecret   = "CHOREO_SHM_TEST_SECRET"
)

// TestRankProcess is one rank's process; it is skipped unless a process
// test started it. It connects from the environment, runs its scenario
// and prints "OK <what>", "ERR <sentinel> <what>: <error>" and progress
// lines.
func TestRankProcess(t *testing.T) {
	scenario := os.Getenv(envScenario)
	if scenario == "" {
		t.Skip("run by the process tests as a rank's process")
	}
	rank, _ := strconv.Atoi(os.Getenv(envRank))
	size, _ := strconv.Atoi(os.Getenv(envSize))
	secret, _ := hex.DecodeString(os.Getenv(envSecret))
	cfg := Config{Setup: msg.Setup{Run: os.Getenv(envRun), Rank: rank, Size: size, Group: 77, Secret: secret,
		// Only the socket's end may tell a death in time: a silent peer
		// would be lost after the survivors' deadlines.
		PeerTimeout: 40 * time.Second}}
	switch scenario {
	case "kill":
		// Rank 1's messages are read from its memory where the host
		// allows it, whether or not that pays here.
		cfg.CMAMin = DefaultCMAMin
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		tr, err := connect(ctx, cfg)
		cancel()
		if err != nil {
			report("connect", err)
			return
		}
		killScenario(tr)
	case "silent":
		cfg.PeerTimeout = 500 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		tr, err := connect(ctx, cfg)
		cancel()
		if err != nil {
			report("connect", err)
			return
		}
		silentScenario(tr)
	case "crash":
		crashScenario(t, cfg)
	case "bench":
		benchRank(cfg)
	}
}

// report prints an error with the name of the sentinel it matches, or OK.
func report(what string, err error) {
	if err == nil {
		fmt.Println("OK", what)
		return
	}
	name := "other"
	for _, s := range []struct {
		name string
		err  error
	}{{"PeerLost", transport.ErrPeerLost}, {"Timeout", transport.ErrTimeout}, {"Closed", transport.ErrClosed}} {
		if errors.Is(err, s.err) {
			name = s.name
			break
		}
	}
	fmt.Printf("ERR %s %s: %v\n", name, what, err)
}

// regions counts this process's mappings of regions.
func regions() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return -1
	}
	return strings.Count(string(b), "memfd:choreo-shm")
}

const killSize = 64 << 20

// killScenario: rank 1 streams 64 MiB messages to rank 0 until it is
// killed; rank 2 waits for a message from rank 1 and to send it one
// (rendezvous). The survivors report how their operations with rank 1
// ended, how many regions they still map, whether they still work
// together, and how many regions they map once closed.
func killScenario(tr *endpoint) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch tr.Rank() {
	case 1:
		data := make([]byte, killSize)
		for i := range data {
			data[i] = byte(i)
		}
		for i := 0; ; i++ {
			if err := tr.Send(ctx, 0, transport.Tag{Group: 1, Seq: uint64(i)}, data); err != nil {
				report("send", err)
				return
			}
		}
	case 0:
		buf := make([]byte, killSize)
		for i := 0; ; i++ {
			if err := tr.Recv(ctx, 1, transport.Tag{Group: 1, Seq: uint64(i)}, buf); err != nil {
				report("recv", err)
				break
			}
			fmt.Println("GOT", i+1)
		}
		// The messages were read from rank 1's memory where this host
		// lets a process read its sibling's.
		fmt.Println("SINGLE", tr.Stats().SingleCopies > 0 || tr.links[1].cmaPID == 0)
	case 2:
		recv := make(chan error, 1)
		send := make(chan error, 1)
		go func() { recv <- tr.Recv(ctx, 1, transport.Tag{Group: 2}, make([]byte, 8<<20)) }()
		go func() { send <- tr.Send(ctx, 1, transport.Tag{Group: 3}, make([]byte, 8<<20)) }()
		fmt.Println("WAITING")
		report("recv", <-recv)
		report("send", <-send)
	}
	// The region of the pair with the dead rank is unmapped once the
	// operations that may touch it have returned.
	for deadline := time.Now().Add(10 * time.Second); regions() > 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("MAPS", regions())
	// The survivors still work together.
	err := exchange(ctx, tr, 2-tr.Rank(), 1<<20)
	report("survivors", err)
	_ = tr.Close()
	fmt.Println("CLOSED MAPS", regions())
}

// silentScenario: rank 1 waits to be stopped (SIGSTOP: its socket stays
// open, it says nothing more); rank 0 waits for a message from it and
// reports how that ended.
func silentScenario(tr *endpoint) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer tr.Close()
	if tr.Rank() == 1 {
		fmt.Println("WAITING")
		<-ctx.Done()
		return
	}
	fmt.Println("WAITING")
	err := tr.Recv(ctx, 1, transport.Tag{Group: 1}, make([]byte, 8))
	report("recv", err)
	if err != nil && strings.Contains(err.Error(), "silent") {
		fmt.Println("OK silent")
	}
}

// crashScenario connects two ranks in this process, exchanges a message,
// and waits to be killed.
func crashScenario(t *testing.T, cfg Config) {
	ts := make([]*endpoint, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		c := cfg
		c.Rank, c.Size = r, 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ts[r], errs[r] = connect(ctx, c)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			report("connect", err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent := make(chan error, 1)
	go func() { sent <- ts[0].Send(ctx, 1, transport.Tag{Group: 1}, make([]byte, 1<<20)) }()
	err := ts[1].Recv(ctx, 0, transport.Tag{Group: 1}, make([]byte, 1<<20))
	if err == nil {
		err = <-sent
	}
	report("exchange", err)
	fmt.Println("MAPS", regions())
	time.Sleep(time.Minute) // killed before
	t.Error("not killed")
}

// spawn starts this test binary as a rank's process of scenario.
func spawn(t *testing.T, scenario string, rank, size int, run string) *transporttest.Child {
	t.Helper()
	return transporttest.StartChild(t, "TestRankProcess", envScenario+"="+scenario, envRank+"="+strconv.Itoa(rank),
		envSize+"="+strconv.Itoa(size), envRun+"="+run, envSecret+"="+hex.EncodeToString(testSecret))
}

// shmEntries lists /dev/shm.
func shmEntries(t *testing.T) map[string]bool {
	t.Helper()
	es, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	m := make(map[string]bool)
	for _, e := range es {
		m[e.Name()] = true
	}
	return m
}

// checkNoNewShm fails if /dev/shm holds entries that before did not.
func checkNoNewShm(t *testing.T, before map[string]bool) {
	t.Helper()
	for name := range shmEntries(t) {
		if !before[name] {
			t.Errorf("/dev/shm/%s left behind", name)
		}
	}
}

// TestProcessKilledMidTransfer kills a rank (SIGKILL) while it streams
// 64 MiB messages to another: the survivors' operations with it, a
// receive in the middle of a message and a rendezvous send and receive
// waiting on it, fail with ErrPeerLost (not their deadline: the peer
// timeout is longer still), the survivors unmap its regions and still
// work together, and nothing is left under /dev/shm.
func TestProcessKilledMidTransfer(t *testing.T) {
	needShm(t)
	if testing.Short() {
		t.Skip("starts processes")
	}
	before := shmEntries(t)
	run := testRun(t)
	cs := make([]*transporttest.Child, 3)
	for r := range cs {
		cs[r] = spawn(t, "kill", r, 3, run)
	}
	if _, ok := cs[0].Line("GOT 2", 60*time.Second); !ok {
		t.Fatalf("the transfer did not start:\nrank 0: %s\nrank 2: %s", cs[0].Output(), cs[2].Output())
	}
	if _, ok := cs[2].Line("WAITING", 60*time.Second); !ok {
		t.Fatalf("the transfer did not start:\nrank 0: %s\nrank 2: %s", cs[0].Output(), cs[2].Output())
	}
	if err := cs[1].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{
		0: {"ERR PeerLost recv", "SINGLE true", "MAPS 1", "OK survivors", "CLOSED MAPS 0"},
		2: {"ERR PeerLost recv", "ERR PeerLost send", "MAPS 1", "OK survivors", "CLOSED MAPS 0"},
	}
	for _, r := range []int{0, 2} {
		if !cs[r].Wait(60 * time.Second) {
			t.Fatalf("rank %d did not end:\n%s", r, cs[r].Output())
		}
		for _, w := range want[r] {
			if _, ok := cs[r].Line(w, 0); !ok {
				t.Errorf("rank %d: no line %q:\n%s", r, w, cs[r].Output())
			}
		}
		if !cs[r].Success() {
			t.Errorf("rank %d failed:\n%s", r, cs[r].Output())
		}
	}
	if !cs[1].Wait(10 * time.Second) {
		t.Fatal("rank 1 did not die")
	}
	checkNoNewShm(t, before)
}

// TestStaleRun: a run whose process was killed with its ranks connected
// leaves nothing behind (no file under /dev/shm, no rendezvous name), and
// the next start of that run connects; a file named like a region of that
// run is ignored.
func TestStaleRun(t *testing.T) {
	needShm(t)
	if testing.Short() {
		t.Skip("starts processes")
	}
	before := shmEntries(t)
	run := testRun(t)
	c := spawn(t, "crash", 0, 2, run)
	if line, ok := c.Line("MAPS ", 60*time.Second); !ok || line != "MAPS 2" {
		t.Fatalf("the run did not start:\n%s", c.Output())
	}
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !c.Wait(10 * time.Second) {
		t.Fatal("the run did not die")
	}
	checkNoNewShm(t, before)
	if b, err := os.ReadFile("/proc/net/unix"); err == nil && strings.Contains(string(b), "@choreo-shm/"+run+"/") {
		t.Errorf("a rendezvous name of the killed run is left:\n%s", b)
	}

	// A file where a region of the run might be looked for.
	stale := fmt.Sprintf("/dev/shm/choreo-%s-%d-0-1", run, 77)
	if err := os.WriteFile(stale, []byte("garbage of a crashed run"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(stale) })

	ts := build(t, 2, func(c *Config) { c.Run = run })
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent := make(chan error, 1)
	go func() { sent <- ts[0].Send(ctx, 1, transport.Tag{Group: 1}, []byte("again")) }()
	got := make([]byte, 5)
	if err := ts[1].Recv(ctx, 0, transport.Tag{Group: 1}, got); err != nil || string(got) != "again" {
		t.Fatalf("the run's next start: %v %q", err, got)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(stale); err != nil || string(b) != "garbage of a crashed run" {
		t.Errorf("the stale file was touched: %v %q", err, b)
	}
	closeAll(ts)
	_ = os.Remove(stale)
	checkNoNewShm(t, before)
}

// TestProcessSilent stops a rank (SIGSTOP): its socket stays open, so only
// its silence tells; its peer's receive fails with ErrPeerLost once the
// peer timeout has passed without a heartbeat, well before its deadline.
func TestProcessSilent(t *testing.T) {
	needShm(t)
	if testing.Short() {
		t.Skip("starts processes")
	}
	run := testRun(t)
	c0, c1 := spawn(t, "silent", 0, 2, run), spawn(t, "silent", 1, 2, run)
	for _, c := range []*transporttest.Child{c0, c1} {
		if _, ok := c.Line("WAITING", 60*time.Second); !ok {
			t.Fatal("the ranks did not connect")
		}
	}
	if err := c1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !c0.Wait(60 * time.Second) {
		t.Fatalf("rank 0 did not end:\n%s", c0.Output())
	}
	if _, ok := c0.Line("OK silent", 0); !ok {
		t.Fatalf("rank 0:\n%s", c0.Output())
	}
	if _, ok := c0.Line("ERR PeerLost recv", 0); !ok {
		t.Fatalf("rank 0 did not lose its silent peer:\n%s", c0.Output())
	}
}
