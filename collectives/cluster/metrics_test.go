package cluster_test

import (
	"context"
	"fmt"
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

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/metrics"
	"github.com/choreo-gpu/choreo/streams"
)

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
	for line := range strings.Lines(testenv.Scrape(t, srv.Addr())) {
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
