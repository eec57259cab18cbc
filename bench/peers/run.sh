#!/usr/bin/env bash
# Side-by-side all-reduce: Open MPI (shared memory and TCP, separate
# processes) and choreo (in-process ranks, demo bench), in one run, with the
# same sizes, counts and columns. Needs Debian's openmpi-bin and
# libopenmpi-dev (installed here if missing). Not part of CI.
#
#   bash bench/peers/run.sh [ranks] [min bytes] [max bytes] [factor]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-4} min=${2:-4096} max=${3:-67108864} factor=${4:-16}
if ! command -v mpicc >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O3 -o "$out/allreduce" bench/peers/allreduce.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca oob_tcp_if_include lo -n "$n")
printf 'peer\top\tsize(B)\tcount\ttype\tredop\ttime(us)\tp50(us)\talgbw GB/s\tbusbw GB/s\t#wrong\n'
"${mpi[@]}" "$out/allreduce" ompi-default "$min" "$max" "$factor"
"${mpi[@]}" --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo "$out/allreduce" ompi-tcp "$min" "$max" "$factor"
go run ./cmd/demo bench --ranks "$n" --ops allreduce,allreduce_inplace \
  --min-size "$min" --max-size "$max" --factor "$factor"
