#!/usr/bin/env python3
"""torch_gpu_bench.py: torch.distributed on GPUs, the peer of `demo bench --backend cuda`.

N processes started by this script, one GPU each (rank % visible GPUs, as choreo's
launcher gives GPU = local rank), backend nccl or gloo, float32 tensors on the GPU:

    python3 bench/peers/torch_gpu_bench.py -n N --backend nccl [--ops allreduce,allgather] [--sizes ...]

Per op and size (bytes per rank): 5 warm-ups, then the timed ops back to back between
two torch.cuda.synchronize() (time(us) = total / count, nccl-tests' batch time), and
the p50 of single ops each closed by a synchronize; one checked op first (#wrong).
Rank 0 prints TSV rows: peer op size(B) count type redop time(us) p50(us) algbw busbw #wrong.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends are set for the workers).
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

SIZES = "4096,1048576,67108864,268435456"


def worker(a):
    import torch
    import torch.distributed as dist

    dev = torch.device("cuda", a.rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group(a.backend, init_method=f"tcp://127.0.0.1:{a.port}", rank=a.rank, world_size=a.n)
    n = a.n
    for op in a.ops.split(","):
        for nbytes in (int(s) for s in a.sizes.split(",")):
            count = nbytes // 4
            x = torch.full((count,), float(a.rank + 1), device=dev)
            if op == "allreduce":
                def run():
                    dist.all_reduce(x)
                want, factor = float(n * (n + 1) // 2), 2 * (n - 1) / n
            elif op == "allgather":
                out = torch.empty(n * count, device=dev)
                def run():
                    dist.all_gather_into_tensor(out, x)
                factor = (n - 1) / n
            else:
                raise SystemExit(f"torch_gpu_bench: unknown op {op}")
            run()
            torch.cuda.synchronize()
            if op == "allreduce":
                wrong = int((x != want).sum())
            else:
                ref = torch.cat([torch.full((count,), float(r + 1), device=dev) for r in range(n)])
                wrong = int((out != ref).sum())
            for _ in range(5):
                run()
            torch.cuda.synchronize()
            iters = 20 if nbytes >= 64 << 20 else 200
            lat = []
            for _ in range(min(iters, 50)):
                t0 = time.perf_counter()
                run()
                torch.cuda.synchronize()
                lat.append(time.perf_counter() - t0)
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                run()
            torch.cuda.synchronize()
            t = (time.perf_counter() - t0) / iters
            if a.rank == 0:
                algbw = nbytes * (n if op == "allgather" else 1) / t / 1e9
                print(f"torch-{a.backend}\t{op}\t{nbytes}\t{count}\tfloat32\t{'sum' if op == 'allreduce' else '-'}\t"
                      f"{t * 1e6:.1f}\t{statistics.median(lat) * 1e6:.1f}\t{algbw:.3f}\t{algbw * factor:.3f}\t{wrong}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=2)
    p.add_argument("--backend", default="nccl", choices=("nccl", "gloo"))
    p.add_argument("--ops", default="allreduce,allgather")
    p.add_argument("--sizes", default=SIZES)
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    if a.rank >= 0:
        return worker(a)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        a.port = s.getsockname()[1]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    procs = [subprocess.Popen([sys.executable, __file__, "-n", str(a.n), "--backend", a.backend, "--ops", a.ops,
                               "--sizes", a.sizes, "--rank", str(r), "--port", str(a.port)], env=env)
             for r in range(a.n)]
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        raise SystemExit(f"torch_gpu_bench: exit codes {codes}")


if __name__ == "__main__":
    main()
