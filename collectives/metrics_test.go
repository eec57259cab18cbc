package collectives_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/metrics"
)

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
	body := testenv.Scrape(t, srv.Addr())
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

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
