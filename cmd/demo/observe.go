package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/metrics"
	"github.com/choreo-gpu/choreo/trace"
)

// obsFlags are run's and bench's ways to see the choreography: a timeline
// of every rank, and a Prometheus endpoint.
type obsFlags struct {
	Trace         string        `help:"Write a timeline of every rank to this file (Chrome trace format: open it in ui.perfetto.dev or chrome://tracing, or draw it with 'demo trace render')." placeholder:"FILE"`
	Metrics       string        `help:"Serve Prometheus metrics at http://ADDR/metrics (a bare :port is loopback); ranks in processes listen on port+rank." env:"CHOREO_METRICS_ADDR" placeholder:"ADDR"`
	MetricsLinger time.Duration `help:"Keep the metrics endpoint up this long after an in-process run, for a last scrape." default:"0s"`
}

// envTraceDir tells a launched rank where to write its part of the
// trace (rank-N.json); the launcher merges the parts.
const envTraceDir = "CHOREO_TRACE_DIR"

// observed is what a world records into and serves, closed with it.
type observed struct {
	tracer    *trace.Tracer
	tracePath string // where close writes the trace
	server    *metrics.Server
}

// options are the groups' options that record into o.
func (o *observed) options() []collectives.Option {
	var opts []collectives.Option
	if o.tracer != nil {
		opts = append(opts, collectives.WithTracer(o.tracer))
	}
	if o.server != nil {
		opts = append(opts, collectives.WithMetrics(o.server.Metrics))
	}
	return opts
}

// observeLocal sets up the trace and the endpoint of an in-process world.
func observeLocal(log *zap.Logger, f obsFlags) (*observed, error) {
	o := &observed{tracePath: f.Trace}
	if f.Trace != "" {
		o.tracer = trace.New()
	}
	if f.Metrics != "" {
		s, err := metrics.Serve(f.Metrics, log)
		if err != nil {
			return nil, err
		}
		o.server = s
		fmt.Printf("metrics: http://%s/metrics\n", s.Addr())
	}
	return o, nil
}

// observeRank sets up the trace part of a launched rank, if its launcher
// asked for one (its metrics endpoint comes from CHOREO_METRICS_ADDR,
// which collectives reads).
func observeRank(rank int) *observed {
	dir := os.Getenv(envTraceDir)
	if dir == "" {
		return &observed{}
	}
	return &observed{tracer: trace.New(), tracePath: partPath(dir, rank)}
}

func partPath(dir string, rank int) string {
	return filepath.Join(dir, "rank-"+strconv.Itoa(rank)+".json")
}

// close writes the trace and stops the endpoint; it reports a failure on
// stderr, as the run's outcome is already decided.
func (o *observed) close() {
	if o == nil {
		return
	}
	if o.tracer != nil && o.tracePath != "" {
		if err := writeTrace(o.tracer, o.tracePath); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
	}
	if o.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = o.server.Close(ctx)
	}
}

// linger keeps the endpoint up for d after the run (until SIGINT).
func (o *observed) linger(d time.Duration) {
	if o == nil || o.server == nil || d <= 0 {
		return
	}
	fmt.Printf("metrics: serving for %v more at http://%s/metrics\n", d, o.server.Addr())
	ctx, stop := signalContext()
	defer stop()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

func writeTrace(tr *trace.Tracer, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := tr.WriteJSON(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// rankMetricsAddr is rank's endpoint when ranks are processes of one
// host: the port plus the rank.
func rankMetricsAddr(addr string, rank int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: port: %w", addr, err)
	}
	if p != 0 {
		p += rank
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// mergeParts merges the ranks' trace parts in dir into path and says
// which ranks wrote none (a rank that was killed writes nothing).
func mergeParts(dir, path string, n int) error {
	var parts []*trace.File
	var missing []int
	for r := range n {
		f, err := os.Open(partPath(dir, r))
		if err != nil {
			missing = append(missing, r)
			continue
		}
		p, err := trace.ReadFile(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("trace: rank %d: %w", r, err)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return fmt.Errorf("trace: no rank wrote its part")
	}
	m, err := trace.Merge(parts...)
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := writeFile(out, m); err != nil {
		return err
	}
	sort.Ints(missing)
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "demo: trace: %s wrote no part\n", rankList(missing))
	}
	return nil
}

func writeFile(out *os.File, f *trace.File) error {
	if err := json.NewEncoder(out).Encode(f); err != nil {
		_ = out.Close()
		return fmt.Errorf("trace: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
