package collectives_test

import (
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// Benchmarks of the device-resident data path beside the host path, on
// whatever backend CHOREO_BACKEND names (the targets are the H200's:
// CHOREO_BACKEND=cuda go test -run '^$' -bench Device ./collectives):
//
//   - BenchmarkDeviceLatency: 2 in-process ranks, 1-element float32
//     all-reduce end to end (launch to both outputs ready), p50.
//   - BenchmarkDeviceBusBW: 64 MiB float32 all-reduce in place, all-gather
//     (64 MiB out), reduce-scatter (64 MiB in) and broadcast for 2 and 4
//     ranks on one device: busbw as nccl-tests defines it, and its ratio to
//     the floor (n-1)/n^2 x C (broadcast: (n-1)/n^2 x C as well, each rank
//     writing its copy), C the device-to-device copy rate (bytes read plus
//     written) measured in the same run.

var benchPaths = []collectives.DataPath{collectives.DataPathDevice, collectives.DataPathStaged}

func BenchmarkDeviceLatency(b *testing.B) {
	for _, path := range benchPaths {
		b.Run(path.String(), func(b *testing.B) {
			w := newWorld(b, 2, collectives.WithDataPath(path), collectives.WithTimeout(60*time.Second))
			xs := make([]*array.Array, 2)
			for r := range 2 {
				xs[r] = fromFloat64(b, w.s[r], gpu.Float32, []float64{float64(r)}, 1)
			}
			// Each rank on a goroutine of its own, as a program with a
			// goroutine per rank runs: launch, wait for the output, again.
			// Rank 0's iterations are timed.
			loop := func(r, iters int, lat []time.Duration) error {
				for i := range iters {
					t0 := time.Now()
					y, err := w.groups[r].AllReduce(w.s[r], xs[r], collectives.Sum)
					if err != nil {
						return err
					}
					if err := y.Wait(testenv.Ctx(b, time.Minute)); err != nil {
						return err
					}
					if lat != nil {
						lat[i] = time.Since(t0)
					}
					y.Free()
				}
				return nil
			}
			both := func(iters int, lat []time.Duration) {
				errs := make(chan error, 2)
				for r := range 2 {
					go func() {
						l := lat
						if r != 0 {
							l = nil
						}
						errs <- loop(r, iters, l)
					}()
				}
				for range 2 {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
			both(50, nil)
			lat := make([]time.Duration, b.N)
			b.ResetTimer()
			both(b.N, lat)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-us")
			b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds())/1e3, "p90-us")
		})
	}
}

// copyRate measures the device's copy rate C (bytes read plus written per
// second) with 256 MiB device-to-device copies on one stream.
func copyRate(b *testing.B, w *world) float64 {
	const size = 256 << 20
	src, err := array.New(w.s[0], []int{size / 4}, gpu.Float32)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := array.New(w.s[0], []int{size / 4}, gpu.Float32)
	if err != nil {
		b.Fatal(err)
	}
	// reps copies in one batch, so that the time is the copies', not the
	// completion's notice (the queue polls for it).
	copies := func(reps int) time.Duration {
		cmds := make([]gpu.Command, reps)
		for i := range cmds {
			cmds[i] = gpu.Copy{Dst: dst.Buffer(), Src: src.Buffer(), Bytes: size}
		}
		done := make(chan error, 1)
		t0 := time.Now()
		if _, err := w.s[0].Enqueue(cmds, func(err error) { done <- err }); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	copies(2)
	// The difference of two batch sizes cancels the fixed cost.
	const few, many = 4, 44
	d := copies(many) - copies(few)
	return 2 * size * (many - few) / d.Seconds()
}

func BenchmarkDeviceBusBW(b *testing.B) {
	const size = 64 << 20
	for _, n := range []int{2, 4} {
		for _, path := range benchPaths {
			for _, op := range []string{"allreduce", "allgather", "reducescatter", "broadcast"} {
				b.Run(path.String()+"/"+op+"/n="+string(rune('0'+n)), func(b *testing.B) {
					w := newWorld(b, n, collectives.WithDataPath(path), collectives.WithTimeout(5*time.Minute))
					c := copyRate(b, w)
					elems := size / 4
					if op == "allgather" {
						elems /= n
					}
					xs := make([]*array.Array, n)
					for r := range n {
						x, err := array.Full(w.s[r], []int{elems}, gpu.Float32, float64(r+1))
						if err != nil {
							b.Fatal(err)
						}
						xs[r] = x
					}
					run := func() {
						ys := make([]*array.Array, n)
						for r := range n {
							var y *array.Array
							var err error
							g, s := w.groups[r], w.s[r]
							switch op {
							case "allreduce":
								y, err = g.AllReduce(s, xs[r], collectives.Sum, collectives.Donate())
							case "allgather":
								y, err = g.AllGather(s, xs[r])
							case "reducescatter":
								y, err = g.ReduceScatter(s, xs[r], collectives.Sum)
							case "broadcast":
								y, err = g.Broadcast(s, xs[r], 0)
							}
							if err != nil {
								b.Fatal(err)
							}
							ys[r] = y
						}
						for r, y := range ys {
							if err := y.Wait(testenv.Ctx(b, 5*time.Minute)); err != nil {
								b.Fatal(err)
							}
							if op == "allreduce" {
								xs[r] = y // donated: the output is the next input
							} else {
								y.Free()
							}
						}
					}
					run()
					b.ResetTimer()
					t0 := time.Now()
					for range b.N {
						run()
					}
					per := time.Since(t0).Seconds() / float64(b.N)
					f := float64(n-1) / float64(n)
					bus := size / per * f // all-gather, reduce-scatter: S(n-1)/n per t
					switch op {
					case "allreduce":
						bus *= 2
					case "broadcast":
						bus = size / per
					}
					floor := c * float64(n-1) / float64(n*n)
					b.ReportMetric(bus/1e9, "busbw-GB/s")
					b.ReportMetric(c/1e9, "C-GB/s")
					b.ReportMetric(bus/floor, "of-floor")
				})
			}
		}
	}
}
