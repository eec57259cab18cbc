package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
)

// EnvAddr is the variable that turns the Prometheus endpoint on for
// programs that read it (every group's ranks, in-process or joined, and
// demo's): the address to listen on; a bare ":port" listens on loopback.
const EnvAddr = "CHOREO_METRICS_ADDR"

// Server serves a Metrics to Prometheus at /metrics. It owns its
// registry and MeterProvider (no global state), so several may live in one
// process.
type Server struct {
	*Metrics
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	ln       net.Listener
	done     chan struct{}
}

// Serve starts a Prometheus endpoint on addr (host:port; an empty host is
// loopback, port 0 picks a free one) and the Metrics it serves, beside the
// Go runtime's (go_*) and the process's (process_*) metrics, under the
// service name ServiceName gives.
func Serve(addr string, log *zap.Logger) (*Server, error) {
	if log == nil {
		log = zap.NewNop()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: serve %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1" // off the network unless asked
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: process collector: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	res, err := serviceResource(ServiceName())
	if err != nil {
		return nil, fmt.Errorf("metrics: resource: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	m, err := New(mp)
	if err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, fmt.Errorf("metrics: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &Server{Metrics: m, provider: mp, ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics endpoint stopped", zap.String("addr", ln.Addr().String()), zap.Error(err))
		}
	}()
	log.Info("metrics endpoint listening", zap.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the endpoint and the MeterProvider, bounded by ctx.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	if perr := s.provider.Shutdown(ctx); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("metrics: close: %w", err)
	}
	return nil
}
