package shm

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/tcp"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// BenchmarkLoopback measures two ranks moving the same bytes the same way
// over shm and, beside them in the same run, over tcp on loopback (like
// with like), with a plain copy of the bytes as the
// floor (shm copies each byte twice: into a slot, out of it):
//
//   - oneway-64MiB: rank 0 sends 64 MiB messages that rank 1 receives
//     (bytes/s is the one-way bandwidth).
//   - rtt-4KiB: rank 0 sends 4 KiB, rank 1 receives it and sends 4 KiB
//     back (ns/op is the round trip).
//
// "procs" runs rank 1 in a process of its own (this test binary again),
// as ranks run; "inproc" holds both ranks in this process (the regions are
// real shared mappings all the same).
//
// Run: go test -run='^$' -bench=Loopback ./collectives/transport/shm
func BenchmarkLoopback(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
		echo bool
	}{{"oneway-64MiB", 64 << 20, false}, {"rtt-4KiB", 4 << 10, true}} {
		b.Run(c.name+"/shm-procs", func(b *testing.B) { benchProcs(b, "shm", c.size, c.echo) })
		b.Run(c.name+"/tcp-procs", func(b *testing.B) { benchProcs(b, "tcp", c.size, c.echo) })
		b.Run(c.name+"/shm-inproc", func(b *testing.B) { benchInproc(b, c.size, c.echo) })
		if !c.echo {
			b.Run(c.name+"/memcpy", func(b *testing.B) { benchCopy(b, c.size) })
		}
	}
}

// BenchmarkSingleCopy measures rank 0 sending large messages that rank 1,
// a process of its own, receives: read once from the sender's memory
// ("single": CHOREO_SHM_CMA=262144, whether or not that pays here), and
// through the slots ("slots": CHOREO_SHM_CMA=off on both ranks), like
// with like in the same run.
//
// Run: go test -run='^$' -bench=SingleCopy ./collectives/transport/shm
func BenchmarkSingleCopy(b *testing.B) {
	for _, size := range []int{1 << 20, 16 << 20, 64 << 20} {
		for _, mode := range []string{"slots", "single"} {
			b.Run(fmt.Sprintf("oneway-%dMiB/%s", size>>20, mode), func(b *testing.B) {
				if mode == "slots" {
					b.Setenv(envCMA, "off")
				} else {
					b.Setenv(envCMA, strconv.Itoa(DefaultCMAMin))
				}
				benchProcs(b, "shm", size, false)
			})
		}
	}
}

// Variables of a benchmark's rank 1 process (with envScenario "bench").
const (
	envBenchKind = "CHOREO_SHM_BENCH_KIND" // shm or tcp
	envBenchSize = "CHOREO_SHM_BENCH_SIZE"
	envBenchEcho = "CHOREO_SHM_BENCH_ECHO"
	envBenchN    = "CHOREO_SHM_BENCH_N"
	envBenchAddr = "CHOREO_SHM_BENCH_ADDR" // tcp: "rank 1 listens at"
	// envBenchDelay, a duration, keeps rank 1 busy that long before each
	// Recv (the variable reaches rank 1 through the environment).
	envBenchDelay = "CHOREO_SHM_BENCH_DELAY"
)

// benchEnd is one side of a benchmark: rank 0 sends (and receives the
// echo), rank 1 receives (and echoes), n times.
func benchEnd(ctx context.Context, tr transport.Transport, size int, echo bool, n int, b *testing.B) error {
	peer := 1 - tr.Rank()
	out, in := make([]byte, size), make([]byte, size)
	for i := range out {
		out[i] = byte(i)
	}
	var lat []time.Duration
	delay, _ := time.ParseDuration(os.Getenv(envBenchDelay))
	if b != nil {
		lat = make([]time.Duration, 0, n)
		b.SetBytes(int64(size))
		b.ResetTimer()
	}
	for i := range n {
		tag := transport.Tag{Group: 1, Seq: uint64(i)}
		if tr.Rank() == 0 {
			start := time.Now()
			if err := tr.Send(ctx, peer, tag, out); err != nil {
				return err
			}
			if echo {
				tag.Step = 1
				if err := tr.Recv(ctx, peer, tag, in); err != nil {
					return err
				}
				if lat != nil {
					lat = append(lat, time.Since(start))
				}
			}
			continue
		}
		if delay > 0 {
			// A busy peer: rank 0's message comes while rank 1 is
			// elsewhere, and rank 1 echoes that late. (A busy wait:
			// sleeps are far coarser than this.)
			for t := time.Now(); time.Since(t) < delay; {
			}
		}
		if err := tr.Recv(ctx, peer, tag, in); err != nil {
			return err
		}
		if echo {
			tag.Step = 1
			if err := tr.Send(ctx, peer, tag, in); err != nil {
				return err
			}
		}
	}
	if b != nil {
		b.StopTimer()
		if len(lat) > 0 {
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds()), "p90-ns")
		}
	}
	return nil
}

func benchInproc(b *testing.B, size int, echo bool) {
	ts := build(b, 2, nil)
	defer closeAll(ts)
	// Collectives run under a deadline: so does the benchmark.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan error, 1)
	n := b.N
	go func() { done <- benchEnd(ctx, ts[1], size, echo, n, nil) }()
	if err := benchEnd(ctx, ts[0], size, echo, n, b); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func benchCopy(b *testing.B, size int) {
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	b.SetBytes(int64(size))
	for b.Loop() {
		copy(dst, src)
	}
}

// benchProcs runs rank 1 in a process of its own (benchRank) and rank 0
// here.
func benchProcs(b *testing.B, kind string, size int, echo bool) {
	needShm(b)
	run := testRun(b)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRankProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envScenario+"=bench", envRank+"=1", envSize+"=2", envRun+"="+run,
		envSecret+"="+hex.EncodeToString(testSecret), envBenchKind+"="+kind, envBenchSize+"="+strconv.Itoa(size),
		envBenchEcho+"="+strconv.FormatBool(echo), envBenchN+"="+strconv.Itoa(b.N))
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(pipe)
	line := func() string {
		if lines.Scan() {
			return lines.Text()
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	var tr transport.Transport
	switch kind {
	case "shm":
		tr, err = connect(cctx, Config{Setup: msg.Setup{Run: run, Rank: 0, Size: 2, Group: 77, Secret: testSecret}})
	case "tcp":
		l := line()
		addr, ok := strings.CutPrefix(l, "ADDR ")
		if !ok {
			b.Fatalf("rank 1: %q", l)
		}
		tr, err = tcpEndpoint(cctx, nil, tcp.Config{
			Setup: msg.Setup{Addrs: []string{"127.0.0.1:1", addr}, Rank: 0, Size: 2, Group: 77, Secret: testSecret}})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tr.Close() }()
	if err := benchEnd(ctx, tr, size, echo, b.N, b); err != nil {
		b.Fatal(err)
	}
	if l := line(); l != "OK bench" {
		b.Fatalf("rank 1: %q", l)
	}
}

// benchRank is rank 1 of benchProcs.
func benchRank(cfg Config) {
	size, _ := strconv.Atoi(os.Getenv(envBenchSize))
	echo, _ := strconv.ParseBool(os.Getenv(envBenchEcho))
	n, _ := strconv.Atoi(os.Getenv(envBenchN))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	var tr transport.Transport
	var err error
	switch os.Getenv(envBenchKind) {
	case "shm":
		tr, err = connect(cctx, cfg)
	case "tcp":
		var l *tcp.Listener
		if l, err = tcp.Listen("127.0.0.1:0"); err != nil {
			break
		}
		fmt.Println("ADDR", l.Addr())
		tr, err = tcpEndpoint(cctx, l, tcp.Config{
			Setup: msg.Setup{Addrs: []string{"127.0.0.1:1", l.Addr()}, Rank: 1, Size: 2, Group: 77, Secret: cfg.Secret}})
	}
	if err != nil {
		report("connect", err)
		return
	}
	defer func() { _ = tr.Close() }()
	report("bench", benchEnd(ctx, tr, size, echo, n, nil))
}

// tcpEndpoint is a rank of two over tcp links on l (nil for rank 0, which
// dials), with the message layer's defaults.
func tcpEndpoint(ctx context.Context, l *tcp.Listener, cfg tcp.Config) (*msg.Endpoint, error) {
	links, err := l.ConnectLinks(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return msg.New(msg.Config{Rank: cfg.Rank, Size: 2, Name: "tcp", MaxBuffered: msg.DefaultMaxBuffered,
		PeerTimeout: msg.DefaultPeerTimeout, HeartbeatInterval: msg.DefaultHeartbeatInterval,
		Poll: spin.PollBudget(msg.EnvPoll, 2)}, links)
}
