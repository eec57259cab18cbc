// Package metrics counts what choreo's collectives do, through the
// OpenTelemetry metric API, and serves it to Prometheus: per group and op,
// the calls, the bytes, the latency and the failures by cause; and, as
// gauges, the fences live, the GPU-side waits pending and the staging
// bytes in use.
//
//	m, err := metrics.Serve("127.0.0.1:9464", log) // or CHOREO_METRICS_ADDR
//	groups, err := collectives.Local(rt, 4, collectives.WithMetrics(m.Metrics))
//	// curl http://127.0.0.1:9464/metrics
//
// Nothing is counted unless a group is given a *Metrics: a nil *Metrics
// records nothing. Serve listens on loopback unless the address names
// another host. The package imports no other package of choreo.
package metrics
