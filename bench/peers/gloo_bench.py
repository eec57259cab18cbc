#!/usr/bin/python3
"""gloo_bench.py: the Gloo peer of choreo's `demo bench` (see run.sh, README.md).

torch.distributed, backend gloo, over loopback (tcp://127.0.0.1, GLOO_SOCKET_IFNAME=lo,
one torch thread per process), N separate processes started by this script:

    /usr/bin/python3 bench/peers/gloo_bench.py -n N [--label gloo] [--ops ...] [--sizes ...]

Same ops, sizes, counts and columns as mpi_bench.c: allreduce (float32 SUM; torch's is
in place, so the buffer is reloaded before each check), allgather (size = bytes per rank,
output N x size), sendrecv (ring exchange: isend to rank+1, irecv from rank-1). Per size:
one checked op, warm-up, per-op latency (each op after a barrier, max over ranks,
median = p50), nccl-tests batch time (ops back to back after one barrier, max over
ranks / count = time(us)), one more checked op. Rank 0 prints TSV rows:
peer op size(B) count type redop time(us) p50(us) algbw busbw #wrong.
Only what Debian's python3-torch provides. The counts are choreo's, cut where an op is
slow: env BENCH_BUDGET_S (default 2) caps each timed loop at about that many seconds.
"""

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

OPS = ("allreduce", "allgather", "sendrecv")
SIZES = "4096,65536,1048576,16777216,67108864"


def iterations(nbytes):
    """The warm-up and timed counts by size, as in choreo's demo bench."""
    if nbytes <= 4 << 10:
        warm, timed = 50, 1000
    elif nbytes <= 64 << 10:
        warm, timed = 20, 500
    elif nbytes <= 1 << 20:
        warm, timed = 10, 100
    elif nbytes <= 16 << 20:
        warm, timed = 3, 20
    else:
        warm, timed = 2, 10
    return warm, timed


def capped(timed, perop):
    """Cut timed so that one timed loop takes about BENCH_BUDGET_S seconds (default 2;
    0 or less: no cap) at the warm-up's median op time (the slowest rank's), keeping at least 5."""
    budget = float(os.environ.get("BENCH_BUDGET_S", "2") or 2)
    if budget <= 0 or perop <= 0:
        return timed
    return min(timed, max(5, int(budget / perop)))


def worker(args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, n = args.rank, args.n
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=n, timeout=datetime.timedelta(seconds=args.op_timeout))
    right, left = (rank + 1) % n, (rank - 1) % n

    def pattern(r, count):  # rank r's input: r%3 + i%5, exact in float32 and in sums
        return torch.arange(count, dtype=torch.float32).remainder_(5).add_(r % 3)

    for op in args.ops.split(","):
        if op not in OPS:
            raise SystemExit(f"gloo_bench: unknown op {op}")
        for nbytes in (int(s) for s in args.sizes.split(",")):
            count = nbytes // 4
            if count < 1:
                continue
            nbytes = count * 4
            src = pattern(rank, count)
            if op == "allreduce":
                buf = src.clone()
                want = sum(r % 3 for r in range(n)) + n * torch.arange(count, dtype=torch.float32).remainder_(5)

                def run():
                    dist.all_reduce(buf)

                def reload():
                    buf.copy_(src)

                def wrong():
                    w = int((buf != want).sum())
                    buf.zero_()  # values stay 0 during the timed ops (torch's all-reduce is in place)
                    return w
            elif op == "allgather":
                out = torch.empty(n * count, dtype=torch.float32)
                outs = list(out.chunk(n))
                want = torch.cat([pattern(r, count) for r in range(n)])

                def run():
                    dist.all_gather(outs, src)

                def reload():
                    pass

                def wrong():
                    w = int((out != want).sum())
                    out.fill_(float("nan"))
                    return w
            else:
                out = torch.empty(count, dtype=torch.float32)
                want = pattern(left, count)

                def run():
                    reqs = [dist.isend(src, right), dist.irecv(out, left)]
                    for r in reqs:
                        r.wait()

                def reload():
                    pass

                def wrong():
                    w = int((out != want).sum())
                    out.fill_(float("nan"))
                    return w

            reload()
            run()
            bad = wrong()
            warm, timed = iterations(nbytes)
            wl = []
            for _ in range(warm):
                t0 = time.perf_counter()
                run()
                wl.append(time.perf_counter() - t0)
            # the median: one slow op does not cut the counts
            tw = torch.tensor([sorted(wl)[(warm - 1) // 2]], dtype=torch.float64)
            dist.all_reduce(tw, op=dist.ReduceOp.MAX)
            table, timed = timed, capped(timed, float(tw[0]))
            if rank == 0:
                print(f"# {args.label} {op} {nbytes}: warm {warm} timed {timed} (table {table},"
                      f" warm-up median {float(tw[0]) * 1e6:.1f} us/op)", file=sys.stderr, flush=True)
            lat = torch.empty(timed, dtype=torch.float64)
            for i in range(timed):
                dist.barrier()
                t0 = time.perf_counter()
                run()
                lat[i] = time.perf_counter() - t0
            dist.all_reduce(lat, op=dist.ReduceOp.MAX)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(timed):
                run()
            batch = torch.tensor([(time.perf_counter() - t0) / timed], dtype=torch.float64)
            dist.all_reduce(batch, op=dist.ReduceOp.MAX)
            reload()
            run()
            bad += wrong()
            badt = torch.tensor([bad], dtype=torch.int64)
            dist.all_reduce(badt)
            if rank == 0:
                t = float(batch[0])
                p50 = float(lat.sort().values[timed // 2])
                moved = nbytes * (n if op == "allgather" else 1)
                algbw = moved / t / 1e9
                factor = {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n}.get(op, 1.0)
                redop = "sum" if op == "allreduce" else "-"
                print(f"{args.label}\t{op}\t{nbytes}\t{count}\tfloat32\t{redop}\t{t * 1e6:.1f}\t{p50 * 1e6:.1f}"
                      f"\t{algbw:.3f}\t{algbw * factor:.3f}\t{int(badt[0])}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    """Start N worker processes; if one fails, stop the others and fail."""
    port = args.port or free_port()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    base = [sys.executable, os.path.abspath(__file__), "-n", str(args.n), "--label", args.label,
            "--ops", args.ops, "--sizes", args.sizes, "--port", str(port), "--op-timeout", str(args.op_timeout)]
    procs = [subprocess.Popen(base + ["--rank", str(r)], env=env) for r in range(args.n)]

    def stop(*_):
        for p in procs:
            if p.poll() is None:
                p.kill()
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, stop)
    rc = 0
    try:
        while procs:
            for p in list(procs):
                r = p.poll()
                if r is None:
                    continue
                procs.remove(p)
                if r != 0:
                    print(f"gloo_bench: rank {p.args[-1]} exited with {r}; stopping the others", file=sys.stderr)
                    rc = r if r > 0 else 128 - r
                    for q in procs:
                        q.kill()
                    for q in procs:
                        q.wait()
                    procs = []
                    break
            time.sleep(0.05)
    except KeyboardInterrupt:
        stop()
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2, help="processes")
    ap.add_argument("--label", default="gloo")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--sizes", default=SIZES, help="comma-separated bytes per rank")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--op-timeout", type=int, default=120, help="gloo's per-op timeout, seconds")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank >= 0:
        worker(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
