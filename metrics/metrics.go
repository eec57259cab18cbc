package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Gauges is what a group's rank reports when the gauges are read.
type Gauges struct {
	FencesLive      int64
	GPUWaitsPending int64
	StagingBytes    int64
}

// Metrics is choreo's instruments on one MeterProvider. Every series
// carries the labels group (the group's name) and rank (the rank in that
// group). A nil *Metrics records nothing. Safe for concurrent use.
type Metrics struct {
	calls    metric.Int64Counter
	bytes    metric.Int64Counter
	failures metric.Int64Counter
	latency  metric.Float64Histogram

	attrs sync.Map // opKey -> metric.MeasurementOption: one attribute set per group, rank and op

	mu      sync.Mutex
	watches map[uint64]watch // by a number of its own: groups may share a name
	next    uint64
	reg     metric.Registration
}

// watch is one group rank's gauges, read at each collection.
type watch struct {
	key  rankKey
	read func() Gauges
}

type rankKey struct {
	group string
	rank  int
}

type opKey struct {
	group string
	rank  int
	op    string
}

// New makes the instruments on mp's meter "choreo".
func New(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter("github.com/choreo-gpu/choreo")
	m := &Metrics{watches: map[uint64]watch{}}
	var err error
	fail := func(what string, err error) (*Metrics, error) {
		return nil, fmt.Errorf("metrics: %s: %w", what, err)
	}
	if m.calls, err = meter.Int64Counter("choreo.collective.calls", metric.WithDescription("Collectives finished, by group, rank and op.")); err != nil {
		return fail("calls", err)
	}
	if m.bytes, err = meter.Int64Counter("choreo.collective.payload", metric.WithUnit("By"),
		metric.WithDescription("Payload bytes of finished collectives, by group, rank and op.")); err != nil {
		return fail("bytes", err)
	}
	if m.failures, err = meter.Int64Counter("choreo.collective.failures", metric.WithDescription("Failed collectives, by group, rank, op and cause.")); err != nil {
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
		for k, g := range m.gauges() {
			set := metric.WithAttributeSet(attribute.NewSet(attribute.String("group", k.group), attribute.Int("rank", k.rank)))
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

// gauges reads every watched rank's gauges, summed per group and rank
// (two groups of one name and rank count as one series).
func (m *Metrics) gauges() map[rankKey]Gauges {
	m.mu.Lock()
	reads := make([]watch, 0, len(m.watches))
	for _, w := range m.watches {
		reads = append(reads, w)
	}
	m.mu.Unlock()
	out := make(map[rankKey]Gauges, len(reads))
	for _, w := range reads {
		g, sum := w.read(), out[w.key]
		sum.FencesLive += g.FencesLive
		sum.GPUWaitsPending += g.GPUWaitsPending
		sum.StagingBytes += g.StagingBytes
		out[w.key] = sum
	}
	return out
}

// attrsOf is the attribute set of (group, rank, op), made once.
func (m *Metrics) attrsOf(group string, rank int, op string) metric.MeasurementOption {
	k := opKey{group, rank, op}
	if a, ok := m.attrs.Load(k); ok {
		return a.(metric.MeasurementOption)
	}
	a := metric.WithAttributeSet(attribute.NewSet(attribute.String("group", group), attribute.Int("rank", rank), attribute.String("op", op)))
	actual, _ := m.attrs.LoadOrStore(k, a)
	return actual.(metric.MeasurementOption)
}

// Collective records one finished collective of rank of group (its name):
// its op, payload bytes, latency and, if it failed, the cause ("" when it
// succeeded).
func (m *Metrics) Collective(group string, rank int, op string, bytes int, d time.Duration, cause string) {
	if m == nil {
		return
	}
	ctx := context.Background()
	a := m.attrsOf(group, rank, op)
	m.calls.Add(ctx, 1, a)
	m.bytes.Add(ctx, int64(bytes), a)
	m.latency.Record(ctx, d.Seconds(), a)
	if cause != "" {
		m.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("group", group), attribute.Int("rank", rank),
			attribute.String("op", op), attribute.String("cause", cause)))
	}
}

// Watch reads the gauges of rank of group (its name) with read whenever
// the metrics are collected, until the returned stop is called. read must
// not block. Groups that share a name and rank are summed.
func (m *Metrics) Watch(group string, rank int, read func() Gauges) (stop func()) {
	if m == nil {
		return func() {}
	}
	m.mu.Lock()
	m.next++
	id := m.next
	m.watches[id] = watch{rankKey{group, rank}, read}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.watches, id)
		m.mu.Unlock()
	}
}
