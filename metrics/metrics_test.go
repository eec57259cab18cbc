package metrics_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/metrics"
)

// serve starts an endpoint on a free loopback port, closed at the end.
func serve(t *testing.T) *metrics.Server {
	t.Helper()
	s, err := metrics.Serve(":0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// scrape reads the endpoint's exposition over HTTP.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %v %s: %s", err, resp.Status, b)
	}
	return string(b)
}

// TestServeLabels: counters and gauges carry group and rank; two watches
// of one group and rank are summed, and a stopped one is gone; the Go
// runtime's and the process's metrics and the service name are served.
func TestServeLabels(t *testing.T) {
	t.Setenv(metrics.EnvServiceName, "trainer")
	s := serve(t)
	s.Collective("world", 1, "allreduce", 4096, time.Millisecond, "")
	s.Collective("world", 1, "allreduce", 4096, time.Millisecond, "timeout")
	stopA := s.Watch("world", 1, func() metrics.Gauges { return metrics.Gauges{FencesLive: 2, StagingBytes: 10} })
	defer stopA()
	stopB := s.Watch("world", 1, func() metrics.Gauges { return metrics.Gauges{FencesLive: 3, StagingBytes: 5} })
	stopC := s.Watch("world/split-00000001", 0, func() metrics.Gauges { return metrics.Gauges{GPUWaitsPending: 7} })
	body := scrape(t, s.Addr())
	for _, want := range []string{
		`choreo_collective_calls_total\{group="world",op="allreduce",rank="1"\} 2`,
		`choreo_collective_payload_bytes_total\{group="world",op="allreduce",rank="1"\} 8192`,
		`choreo_collective_failures_total\{cause="timeout",group="world",op="allreduce",rank="1"\} 1`,
		`choreo_fences_live\{group="world",rank="1"\} 5`,
		`choreo_staging_in_use_bytes\{group="world",rank="1"\} 15`,
		`choreo_gpu_waits_pending\{group="world/split-00000001",rank="0"\} 7`,
		`go_goroutines \d+`,
		`process_start_time_seconds \S+`,
		`target_info\{.*service_name="trainer".*\} 1`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(body) {
			t.Errorf("no line matching %s", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
	stopB()
	stopC()
	body = scrape(t, s.Addr())
	if !regexp.MustCompile(`(?m)^choreo_fences_live\{group="world",rank="1"\} 2$`).MatchString(body) ||
		strings.Contains(body, "split-00000001") {
		t.Errorf("after two watches stopped, want fences 2 and no split series:\n%s", body)
	}
}

// TestServiceName: CHOREO_SERVICE_NAME wins over OTEL_SERVICE_NAME, which
// wins over the program's name.
func TestServiceName(t *testing.T) {
	t.Setenv(metrics.EnvServiceName, "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	if got, want := metrics.ServiceName(), filepath.Base(os.Args[0]); got != want {
		t.Errorf("no variable: %q, want the program's name %q", got, want)
	}
	t.Setenv("OTEL_SERVICE_NAME", "otel-name")
	if got := metrics.ServiceName(); got != "otel-name" {
		t.Errorf("OTEL_SERVICE_NAME: %q", got)
	}
	t.Setenv(metrics.EnvServiceName, "choreo-name")
	if got := metrics.ServiceName(); got != "choreo-name" {
		t.Errorf("both: %q, want CHOREO_SERVICE_NAME's", got)
	}
}

// A nil *Metrics records nothing and does not panic.
func TestNilMetrics(t *testing.T) {
	var m *metrics.Metrics
	m.Collective("world", 0, "allreduce", 1, time.Millisecond, "timeout")
	m.Watch("world", 0, func() metrics.Gauges { return metrics.Gauges{} })()
}
