package metrics

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Gauges is what a group reports when the gauges are read.
type Gauges struct {
	FencesLive      int64
	GPUWaitsPending int64
	StagingBytes    int64
}

// Metrics is choreo's instruments on one MeterProvider. A nil *Metrics
// records nothing. Safe for concurrent use.
type Metrics struct {
	calls    metric.Int64Counter
	bytes    metric.Int64Counter
	failures metric.Int64Counter
	latency  metric.Float64Histogram

	attrs sync.Map // opKey -> metric.MeasurementOption: one attribute set per group and op

	mu     sync.Mutex
	groups map[rankKey]func() Gauges // per group and rank: its gauges
	reg    metric.Registration
}

type rankKey struct {
	group uint64
	rank  int
}

type opKey struct {
	group uint64
	op    string
}

// New makes the instruments on mp's meter "choreo".
func New(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter("github.com/choreo-gpu/choreo")
	m := &Metrics{groups: map[rankKey]func() Gauges{}}
	var err error
	fail := func(what string, err error) (*Metrics, error) {
		return nil, fmt.Errorf("metrics: %s: %w", what, err)
	}
	if m.calls, err = meter.Int64Counter("choreo.collective.calls", metric.WithDescription("Collectives finished, by group and op.")); err != nil {
		return fail("calls", err)
	}
	if m.bytes, err = meter.Int64Counter("choreo.collective.payload", metric.WithUnit("By"),
		metric.WithDescription("Payload bytes of finished collectives, per rank.")); err != nil {
		return fail("bytes", err)
	}
	if m.failures, err = meter.Int64Counter("choreo.collective.failures", metric.WithDescription("Failed collectives, by group, op and cause.")); err != nil {
		return fail("failures", err)
	}
	if m.latency, err = meter.Float64Histogram("choreo.collective.latency", metric.WithUnit("s"),
		metric.WithDescription("From a collective's call to the end of its comm task."),
		metric.WithExplicitBucketBoundaries(5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.25, 1, 2.5, 10)); err != nil {
		return fail("latency", err)
	}
	fences, err := meter.Int64ObservableGauge("choreo.fences.live", metric.WithDescription("Fences live in the runtime of a group's rank."))
	if err != nil {
		return fail("fences", err)
	}
	waits, err := meter.Int64ObservableGauge("choreo.gpu.waits.pending", metric.WithDescription("GPU-side fence waits of a group's rank enqueued and not yet passed."))
	if err != nil {
		return fail("waits", err)
	}
	staging, err := meter.Int64ObservableGauge("choreo.staging.in_use", metric.WithUnit("By"),
		metric.WithDescription("Pinned staging bytes held by a group's rank's collectives in flight."))
	if err != nil {
		return fail("staging", err)
	}
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		for k, read := range m.groups {
			g := read()
			set := metric.WithAttributes(attribute.String("group", strconv.FormatUint(k.group, 10)), attribute.Int("rank", k.rank))
			o.ObserveInt64(fences, g.FencesLive, set)
			o.ObserveInt64(waits, g.GPUWaitsPending, set)
			o.ObserveInt64(staging, g.StagingBytes, set)
		}
		return nil
	}, fences, waits, staging)
	if err != nil {
		return fail("register gauges", err)
	}
	return m, nil
}

// attrs is the attribute set of (group, op), made once.
func (m *Metrics) attrsOf(group uint64, op string) metric.MeasurementOption {
	k := opKey{group, op}
	if a, ok := m.attrs.Load(k); ok {
		return a.(metric.MeasurementOption)
	}
	a := metric.WithAttributeSet(attribute.NewSet(attribute.String("group", strconv.FormatUint(group, 10)), attribute.String("op", op)))
	actual, _ := m.attrs.LoadOrStore(k, a)
	return actual.(metric.MeasurementOption)
}

// Collective records one finished collective of group: its op, payload
// bytes, latency and, if it failed, the cause ("" when it succeeded).
func (m *Metrics) Collective(group uint64, op string, bytes int, d time.Duration, cause string) {
	if m == nil {
		return
	}
	ctx := context.Background()
	a := m.attrsOf(group, op)
	m.calls.Add(ctx, 1, a)
	m.bytes.Add(ctx, int64(bytes), a)
	m.latency.Record(ctx, d.Seconds(), a)
	if cause != "" {
		m.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("group", strconv.FormatUint(group, 10)),
			attribute.String("op", op), attribute.String("cause", cause)))
	}
}

// Watch reads the gauges of rank of group with read whenever the metrics
// are collected, until the returned stop is called. read must not block.
func (m *Metrics) Watch(group uint64, rank int, read func() Gauges) (stop func()) {
	if m == nil {
		return func() {}
	}
	k := rankKey{group, rank}
	m.mu.Lock()
	m.groups[k] = read
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.groups, k)
		m.mu.Unlock()
	}
}
