package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
// trace (trace.PartPath); the launcher merges the parts.
const envTraceDir = trace.EnvDir

// observed is what a world records into and serves, closed with it. Its
// trace is saved on SIGINT or SIGTERM as soon as one arrives, and again
// at close: a run stopped by a signal, or killed after it, still leaves
// one (each save is whole or not at all).
type observed struct {
	tracer    *trace.Tracer
	tracePath string // where save writes the trace
	server    *metrics.Server

	saveMu  sync.Mutex     // one save at a time, the latest last
	sigs    chan os.Signal // nil: no trace to save on a signal
	stopSig chan struct{}
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
		o.saveOnSignal()
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

// observeRank sets up the trace part and the metrics endpoint of a
// launched rank of a group of size ranks. Its launcher asks for them in
// the environment (envTraceDir: the parts' directory, which it merges;
// metrics.EnvAddr: this rank's endpoint, which collectives reads). Where
// it did not, f's flags given to this rank apply: --trace FILE saves this
// rank's part as FILE.rankN.json (FILE itself for a group of one), and
// --metrics ADDR serves at port+local rank.
func observeRank(rank, size int, f obsFlags) (*observed, error) {
	if f.Metrics != "" && f.Metrics != os.Getenv(metrics.EnvAddr) {
		lr, _ := collectives.LocalRank()
		addr, err := rankMetricsAddr(f.Metrics, lr)
		if err != nil {
			return nil, err
		}
		if err := os.Setenv(metrics.EnvAddr, addr); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	path := ""
	switch dir := os.Getenv(envTraceDir); {
	case dir != "":
		path = trace.PartPath(dir, rank)
	case f.Trace != "" && size > 1:
		ext := filepath.Ext(f.Trace)
		path = fmt.Sprintf("%s.rank%d%s", strings.TrimSuffix(f.Trace, ext), rank, ext)
	case f.Trace != "":
		path = f.Trace
	}
	if path == "" {
		return &observed{}, nil
	}
	o := &observed{tracer: trace.New(), tracePath: path}
	o.saveOnSignal()
	return o, nil
}

// lingerRank keeps a launched rank, and so its metrics endpoint, up for
// d after its run (until SIGINT or SIGTERM).
func lingerRank(d time.Duration) {
	if d <= 0 || os.Getenv(metrics.EnvAddr) == "" {
		return
	}
	ctx, stop := signalContext()
	defer stop()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// saveOnSignal saves the trace when SIGINT or SIGTERM arrives, at once:
// the runtime's own handler then releases the fences and ends the
// process, and a launcher kills a rank that outlasts its grace period.
func (o *observed) saveOnSignal() {
	o.sigs, o.stopSig = make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(o.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-o.sigs:
			o.save()
		case <-o.stopSig:
		}
	}()
}

// save writes the trace, if there is one to write; it reports a failure
// on stderr, as the run's outcome is decided elsewhere.
func (o *observed) save() {
	if o == nil || o.tracer == nil || o.tracePath == "" {
		return
	}
	o.saveMu.Lock()
	defer o.saveMu.Unlock()
	if err := o.tracer.Save(o.tracePath); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
	}
}

// stopTracing ends the recording: what follows (the ranks leaving) is the
// run's shutdown, not the run.
func (o *observed) stopTracing() {
	if o != nil {
		o.tracer.Stop()
	}
}

// close writes the trace and stops the endpoint.
func (o *observed) close() {
	if o == nil {
		return
	}
	if o.sigs != nil {
		signal.Stop(o.sigs)
		close(o.stopSig)
	}
	o.save()
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
// which ranks left none or one cut short (a rank killed before or while it
// saved).
func mergeParts(dir, path string, n int) error {
	res, err := trace.MergeDir(dir, path, n)
	if err != nil {
		return err
	}
	if note := res.Note(); note != "" {
		fmt.Fprintln(os.Stderr, "demo: trace:", note)
	}
	return nil
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
