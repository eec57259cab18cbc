package collectives_test

import (
	"context"
	"errors"
	"io"
	"net/http"
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
	id := regexp.QuoteMeta(`group="` + itoa(w.groups[0].ID()) + `"`)
	for _, want := range []string{
		`choreo_collective_calls_total\{` + id + `,op="allreduce"\} 8`,
		`choreo_collective_payload_bytes_total\{` + id + `,op="allreduce"\} 30720`,
		`choreo_collective_failures_total\{cause="shape_mismatch",` + id + `,op="allreduce"\} 2`,
		`choreo_collective_latency_seconds_count\{` + id + `,op="allreduce"\} 8`,
		`choreo_fences_live\{` + id + `,rank="0"\} \d+`,
		`choreo_gpu_waits_pending\{` + id + `,rank="1"\} \d+`,
		`choreo_staging_in_use_bytes\{` + id + `,rank="0"\} \d+`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(body) {
			t.Errorf("the endpoint has no line matching %s", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
