#!/bin/sh
# Regenerates ops.ptx from ops.cu. Needs nvcc (CUDA 12 or 13); run from
# anywhere. compute_90 PTX is JIT-compiled by the driver for the GPU it
# finds (sm_90 H100/H200 and newer).
set -e
cd "$(dirname "$0")" && nvcc -ptx -arch=compute_90 -O3 -o ops.ptx ops.cu
