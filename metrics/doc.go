// Package metrics counts what choreo's collectives do, through the
// OpenTelemetry metric API, and serves it to Prometheus: per group, rank
// and op, the calls, the bytes, the latency and the failures by cause;
// and, per group and rank, as gauges, the fences live, the GPU-side waits
// pending and the staging bytes in use.
//
//	m, err := metrics.Serve("127.0.0.1:9464", log) // or CHOREO_METRICS_ADDR
//	groups, err := collectives.Local(rt, 4, collectives.WithMetrics(m.Metrics))
//	// curl http://127.0.0.1:9464/metrics
//
// Every choreo series carries two labels: group, the group's name
// (collectives.WithName's, else one derived from the order in which the
// program makes its groups and from their members: "world" for the group
// Join makes, "world/split-3e801244" for a group split from it; the same on
// every rank and in every run, see collectives.Group.Name), and rank, the
// rank in that group. The endpoint also serves the Go runtime's metrics
// (go_*) and the process's (process_*), and target_info names the service:
// CHOREO_SERVICE_NAME, else OTEL_SERVICE_NAME, else the program's name.
// Rank 0 of a world of two processes, after an all-reduce on the world and
// one on a group split from it (histogram buckets and most runtime series
// left out):
//
//	choreo_collective_calls_total{group="world",op="allreduce",rank="0"} 1
//	choreo_collective_calls_total{group="world/split-3e801244",op="allreduce",rank="1"} 1
//	choreo_collective_latency_seconds_sum{group="world",op="allreduce",rank="0"} 0.019073995
//	choreo_collective_latency_seconds_count{group="world",op="allreduce",rank="0"} 1
//	choreo_collective_payload_bytes_total{group="world",op="allreduce",rank="0"} 400000
//	choreo_collective_payload_bytes_total{group="world/split-3e801244",op="allreduce",rank="1"} 400000
//	choreo_fences_live{group="world",rank="0"} 0
//	choreo_gpu_waits_pending{group="world",rank="0"} 0
//	choreo_staging_in_use_bytes{group="world",rank="0"} 0
//	go_goroutines 32
//	go_memstats_heap_alloc_bytes 8.323864e+06
//	process_cpu_seconds_total 0.15
//	process_resident_memory_bytes 4.2831872e+07
//	target_info{service_name="trainer",telemetry_sdk_language="go",telemetry_sdk_name="opentelemetry",telemetry_sdk_version="1.47.0"} 1
//
// A failed collective adds choreo_collective_failures_total with a cause
// label (timeout, peer_lost, shape_mismatch, mismatch, closed, aborted,
// bad_argument, other).
//
// Nothing is counted unless a group is given a *Metrics: a nil *Metrics
// records nothing. Serve listens on loopback unless the address names
// another host. The package imports no other package of choreo.
package metrics
