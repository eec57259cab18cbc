package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	"github.com/choreo-gpu/choreo/metrics"
	"github.com/choreo-gpu/choreo/streams"
)

// scrape reads the endpoint's exposition.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	ctx := testenv.Ctx(t, 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	return string(b)
}

// TestMetricsEndpoint runs collectives on a group with metrics, one of
// them failing by a shape mismatch, and scrapes the Prometheus endpoint:
// the counters, the latency histogram and the gauges are there, with
// their values.
func TestMetricsEndpoint(t *testing.T) {
	srv, err := metrics.Serve(":0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Errorf("endpoint on %s, want loopback by default", srv.Addr())
	}
	const n = 2
	w := newWorld(t, n, collectives.WithMetrics(srv.Metrics))
	ctx := testenv.Ctx(t, 60*time.Second)
	run := func(sizes ...int) []error {
		var ys []*array.Array
		for r := range n {
			x, err := array.Full(w.s[r], []int{sizes[r]}, gpu.Float32, 1)
			if err != nil {
				t.Fatal(err)
			}
			y, err := w.groups[r].AllReduce(w.s[r], x, collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			ys = append(ys, y)
		}
		var errs []error
		for _, y := range ys {
			errs = append(errs, y.Wait(ctx))
		}
		return errs
	}
	for range 3 {
		if err := errors.Join(run(1024, 1024)...); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range run(1024, 512) {
		if !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Fatalf("mismatched all-reduce: %v, want ErrShapeMismatch", err)
		}
	}
	for r := range n {
		_ = w.groups[r].Wait(ctx)
	}
	body := scrape(t, srv.Addr())
	// Every series carries the group's name and the rank; rank 1 gave 512
	// elements to the failed call.
	group := regexp.QuoteMeta(`group="` + w.groups[0].Name() + `"`)
	if w.groups[0].Name() != "group-"+itoa(w.groups[0].ID()) || w.groups[1].Name() != w.groups[0].Name() {
		t.Errorf("Local's groups are named %q and %q, want group-%d", w.groups[0].Name(), w.groups[1].Name(), w.groups[0].ID())
	}
	for _, want := range []string{
		`choreo_collective_calls_total\{` + group + `,op="allreduce",rank="0"\} 4`,
		`choreo_collective_calls_total\{` + group + `,op="allreduce",rank="1"\} 4`,
		`choreo_collective_payload_bytes_total\{` + group + `,op="allreduce",rank="0"\} 16384`,
		`choreo_collective_payload_bytes_total\{` + group + `,op="allreduce",rank="1"\} 14336`,
		`choreo_collective_failures_total\{cause="shape_mismatch",` + group + `,op="allreduce",rank="0"\} 1`,
		`choreo_collective_failures_total\{cause="shape_mismatch",` + group + `,op="allreduce",rank="1"\} 1`,
		`choreo_collective_latency_seconds_count\{` + group + `,op="allreduce",rank="1"\} 4`,
		`choreo_fences_live\{` + group + `,rank="0"\} \d+`,
		`choreo_gpu_waits_pending\{` + group + `,rank="1"\} \d+`,
		`choreo_staging_in_use_bytes\{` + group + `,rank="0"\} \d+`,
		`go_goroutines \d+`,
		`process_start_time_seconds \S+`,
		`target_info\{.*service_name="` + regexp.QuoteMeta(metrics.ServiceName()) + `".*\} 1`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(body) {
			t.Errorf("the endpoint has no line matching %s", want)
		}
	}
	if strings.Contains(body, "unknown_service") {
		t.Error("the endpoint reports OpenTelemetry's unknown_service")
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestGroupNames: names are WithName's or derived from the order of
// creation and the members, the same on every rank: a Split's group is
// named after its parent and its members, and a second split into the
// same members gets "-2".
func TestGroupNames(t *testing.T) {
	const n = 4
	w := newWorld(t, n, collectives.WithName("trainer"))
	splitAll := func(color func(r int) int) []*collectives.Group {
		t.Helper()
		subs := make([]*collectives.Group, n)
		errs := make([]error, n)
		done := make(chan struct{})
		for r := range n {
			go func() {
				defer func() { done <- struct{}{} }()
				subs[r], errs[r] = w.groups[r].Split(color(r), r)
			}()
		}
		for range n {
			<-done
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, g := range subs {
			if g != nil {
				t.Cleanup(func() { _ = g.Close() })
			}
		}
		return subs
	}
	for r := range n {
		if got := w.groups[r].Name(); got != "trainer" {
			t.Fatalf("rank %d: WithName(trainer) named the group %q", r, got)
		}
	}
	parity := splitAll(func(r int) int { return r % 2 })
	again := splitAll(func(r int) int { return r % 2 })
	halves := splitAll(func(r int) int { return r / 2 })
	name := regexp.MustCompile(`^trainer/split-[0-9a-f]{8}$`)
	for r := range n {
		if !name.MatchString(parity[r].Name()) {
			t.Errorf("rank %d: a split is named %q, want trainer/split- and 8 hex digits", r, parity[r].Name())
		}
		if peer := (r + 2) % n; parity[r].Name() != parity[peer].Name() {
			t.Errorf("ranks %d and %d of one split group: %q and %q", r, peer, parity[r].Name(), parity[peer].Name())
		}
		if again[r].Name() != parity[r].Name()+"-2" {
			t.Errorf("rank %d: the same members split again: %q, want %q", r, again[r].Name(), parity[r].Name()+"-2")
		}
		if halves[r].Name() == parity[r].Name() || !name.MatchString(halves[r].Name()) {
			t.Errorf("rank %d: other members: %q (the parity split: %q)", r, halves[r].Name(), parity[r].Name())
		}
	}
	if parity[0].Name() == parity[1].Name() {
		t.Errorf("the two parity groups share the name %q", parity[0].Name())
	}
	if plain := newWorld(t, 1); plain.groups[0].Name() != "group-"+itoa(plain.groups[0].ID()) {
		t.Errorf("a Local world without WithName: %q, want group-%d", plain.groups[0].Name(), plain.groups[0].ID())
	}
}

// envMetricsRank makes TestMetricsRank a rank's process.
const envMetricsRank = "CHOREO_TEST_METRICS_RANK"

// TestMetricsRank is one rank's process, started by TestMetricsAcrossRuns:
// it serves metrics on a loopback port, joins from the environment,
// all-reduces on the world and on a group split from it, scrapes its own
// endpoint over HTTP and prints every line of it after "SCRAPE ".
func TestMetricsRank(t *testing.T) {
	if os.Getenv(envMetricsRank) == "" {
		t.Skip("run by TestMetricsAcrossRuns as a rank's process")
	}
	srv, err := metrics.Serve("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	}()
	rt := testenv.Runtime(t)
	g, err := cluster.Join(testenv.Ctx(t, 60*time.Second), rt, cluster.FromEnv(),
		collectives.WithMetrics(srv.Metrics), collectives.WithTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Close() }()
	s, err := streams.NewGPU(rt, testenv.Device(t))
	if err != nil {
		t.Fatal(err)
	}
	allReduceOnce(s, g, "world")
	sub, err := g.Split(0, -g.Rank()) // one group, the ranks in reverse
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	allReduceOnce(s, sub, "split")
	// The counts are made when each comm task ends, after its output is
	// ready: Wait for the comm streams' tasks so far.
	for _, g := range []*collectives.Group{g, sub} {
		if err := g.Wait(testenv.Ctx(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	for line := range strings.Lines(scrape(t, srv.Addr())) {
		fmt.Print("SCRAPE ", line)
	}
}

// TestMetricsAcrossRuns runs a world of two rank processes twice and reads
// what each scraped from its endpoint: every choreo series carries the
// group's name and the rank; the world is "world" and the split group has
// one name on both ranks; the two runs have the same series; the Go
// runtime's and the process's metrics are there; the service name is the
// program's, or CHOREO_SERVICE_NAME's when set (the second run).
func TestMetricsAcrossRuns(t *testing.T) {
	var series [2][2][]string // per run and rank: the choreo series, without values
	for run := range 2 {
		common := []string{envMetricsRank + "=1", cluster.EnvWorldSize + "=2",
			cluster.EnvHostfile + "=" + hostfile(t, 2), secretEnv(), cluster.EnvRun + "=metrics" + strconv.Itoa(run)}
		service := filepath.Base(os.Args[0])
		if run == 1 {
			service = "trainer"
			common = append(common, metrics.EnvServiceName+"="+service)
		}
		out := rankProcesses(t, common, rankEnvs(0, 1))
		var split [2]string
		for r, lines := range out {
			var body []string
			for _, l := range lines {
				if rest, ok := strings.CutPrefix(l, "SCRAPE "); ok {
					body = append(body, rest)
				}
			}
			all := strings.Join(body, "\n")
			if !has(lines, "OK world") || !has(lines, "OK split") || len(body) == 0 {
				t.Fatalf("run %d rank %d: want OK world, OK split and a scrape:\n%s", run, r, strings.Join(lines, "\n"))
			}
			sub := strconv.Itoa(1 - r) // the split reversed the ranks
			for _, want := range []string{
				`choreo_collective_calls_total\{group="world",op="allreduce",rank="` + strconv.Itoa(r) + `"\} 1`,
				`choreo_collective_calls_total\{group="world/split-[0-9a-f]{8}",op="allreduce",rank="` + sub + `"\} 1`,
				`choreo_fences_live\{group="world",rank="` + strconv.Itoa(r) + `"\} \d+`,
				`choreo_staging_in_use_bytes\{group="world/split-[0-9a-f]{8}",rank="` + sub + `"\} \d+`,
				`go_goroutines \d+`,
				`go_memstats_heap_alloc_bytes \S+`,
				`process_start_time_seconds \S+`,
				`target_info\{.*service_name="` + regexp.QuoteMeta(service) + `".*\} 1`,
			} {
				if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(all) {
					t.Errorf("run %d rank %d: no line matching %s", run, r, want)
				}
			}
			if strings.Contains(all, "unknown_service") {
				t.Errorf("run %d rank %d: the service is OpenTelemetry's unknown_service", run, r)
			}
			split[r] = regexp.MustCompile(`group="(world/split-[0-9a-f]{8})"`).FindStringSubmatch(all + `group="world/split-none"`)[1]
			for _, l := range body {
				if !strings.HasPrefix(l, "choreo_") {
					continue
				}
				if !strings.Contains(l, `group="`) || !strings.Contains(l, `rank="`) {
					t.Errorf("run %d rank %d: a series without group or rank: %s", run, r, l)
				}
				series[run][r] = append(series[run][r], l[:strings.LastIndexByte(l, ' ')])
			}
			if t.Failed() {
				t.Fatalf("run %d rank %d's scrape:\n%s", run, r, all)
			}
		}
		if split[0] != split[1] {
			t.Errorf("run %d: the split group is %q on rank 0 and %q on rank 1", run, split[0], split[1])
		}
	}
	for r := range 2 {
		if a, b := strings.Join(series[0][r], "\n"), strings.Join(series[1][r], "\n"); a != b {
			t.Errorf("rank %d: the series differ between two runs:\n%s\n--- and ---\n%s", r, a, b)
		}
	}
}

// rankProcesses runs one process of this test binary as TestMetricsRank
// per entry of envs (with common too, and without the parent's metrics and
// service variables), and returns each one's output lines, bounded by 90 s.
func rankProcesses(t *testing.T, common []string, envs [][]string) [][]string {
	t.Helper()
	var base []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != metrics.EnvAddr && k != metrics.EnvServiceName && k != "OTEL_SERVICE_NAME" {
			base = append(base, kv)
		}
	}
	out := make([][]string, len(envs))
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for i, env := range envs {
		ctx := testenv.Ctx(t, 90*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMetricsRank$", "-test.count=1", "-test.v")
		cmd.Env = append(append(slices.Clone(base), common...), env...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := cmd.CombinedOutput()
			out[i], errs[i] = strings.Split(string(b), "\n"), err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v:\n%s", i, err, strings.Join(out[i], "\n"))
		}
	}
	return out
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
