package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/trace"
)

// TestLaunchTraceMerged: a run of 4 processes with --trace leaves one
// file, merged from the ranks' parts: a process per rank, each with its
// all-reduce tasks (their group id exact, one for all ranks), every flow
// with both ends on one rank, in order, and, the run having passed, no
// failed span (the ranks leaving is not traced).
func TestLaunchTraceMerged(t *testing.T) {
	out := filepath.Join(t.TempDir(), "trace.json")
	cmd, stdout, stderr := demoCmd(t, 2*time.Minute, "run", "--ranks", "4", "--steps", "2", "--size", "4KiB",
		"--backend", "sim", "--trace", out)
	if code := waitDemo(t, cmd.Wait); code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tf, err := trace.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	tasks := map[int]int{}
	starts, ends := map[string]trace.ChromeEvent{}, map[string]trace.ChromeEvent{}
	groups := map[string]bool{}
	for _, e := range tf.TraceEvents {
		if e.Args["error"] != nil {
			t.Errorf("a passed run's trace has a failed event: %+v", e)
		}
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			names[e.PID], _ = e.Args["name"].(string)
		case e.Ph == "X" && e.Cat == "comm" && e.Name == "allreduce":
			tasks[e.PID]++
			groups[fmt.Sprint(e.Args["group"])] = true
		case e.Ph == "s":
			starts[e.ID] = e
		case e.Ph == "f":
			ends[e.ID] = e
		}
	}
	for r := range 4 {
		if names[r] == "" {
			t.Errorf("no process for rank %d", r)
		}
		if tasks[r] < 2 {
			t.Errorf("rank %d: %d all-reduce tasks, want the 2 steps' at least", r, tasks[r])
		}
	}
	for g := range groups {
		if _, err := strconv.ParseUint(g, 10, 64); err != nil || len(groups) != 1 {
			t.Errorf("all-reduce group ids %v, want one decimal id", groups)
		}
	}
	if len(starts) == 0 || len(starts) != len(ends) {
		t.Errorf("%d flow starts, %d ends", len(starts), len(ends))
	}
	for id, s := range starts {
		e, ok := ends[id]
		if !ok || e.PID != s.PID || e.TS < s.TS {
			t.Errorf("flow %s: start %+v, end %+v", id, s, e)
		}
	}
}

// TestMetricsAfterDemoRun: an in-process run with --metrics answers a
// scrape after the run with its counters.
func TestMetricsAfterDemoRun(t *testing.T) {
	cmd, stdout, stderr := demoCmd(t, 2*time.Minute, "run", "--inproc", "--ranks", "2", "--steps", "3",
		"--size", "4KiB", "--backend", "sim", "--metrics", "127.0.0.1:0", "--metrics-linger", "2m")
	serving := regexp.MustCompile(`metrics: serving for .* at (http://\S+/metrics)`)
	var url string
	deadline := time.Now().Add(90 * time.Second)
	for url == "" && time.Now().Before(deadline) {
		if m := serving.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	if url == "" {
		t.Fatalf("the run never said where it serves\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// 3 steps and the totals' all-reduce, on each of 2 ranks.
	for _, want := range []string{
		`choreo_collective_calls_total{group="group-1",op="allreduce",rank="0"} 4`,
		`choreo_collective_calls_total{group="group-1",op="allreduce",rank="1"} 4`,
		`choreo_collective_latency_seconds_count{group="group-1",op="allreduce",rank="1"} 4`,
		`choreo_fences_live{group="group-1",rank="0"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGINT) // ends the linger
	_ = cmd.Wait()
}
