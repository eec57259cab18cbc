#!/usr/bin/env bash
# Side by side, processes against processes over loopback: Open MPI (its
# defaults, i.e. shared memory, and forced to TCP), Gloo (torch.distributed)
# and choreo's `demo launch -n N bench` (over TCP and over shared memory), in
# one run, for each rank count: all-reduce, all-gather, send/recv, all-to-all
# (even and uneven), gather, scatter, reduce and the batched ring at 4 KiB,
# 64 KiB, 1 MiB, 16 MiB and 64 MiB per rank, then one merged table per rank
# count with the ratios choreo-tcp / best TCP peer and choreo-shm / Open MPI's
# default. Installs the peers from Debian packages if missing
# (openmpi-bin, libopenmpi-dev, python3-torch). Not part of CI. README.md
# says what each column means.
#
#   bash bench/peers/run.sh [ranks...]          # default: 2 4
#
# Environment:
#   BENCH_RESULTS   results directory (default: a new /tmp/choreo-peers.XXXXXX, kept)
#   PEER_TIMEOUT    seconds one peer's run (one rank count) may take (default 300)
#   BENCH_BUDGET_S  Open MPI and Gloo: cap each timed loop at about this many
#                   seconds when an op is slow (default 2; 0: choreo's counts as is)
#   SIZES           bytes per rank, comma-separated (default 4096,...,67108864)
#   OPS             ops, comma-separated (default: all of them; Gloo runs those
#                   gloo_bench.py has: allreduce, allgather, sendrecv)
#   PEERS           peers to run, comma-separated (default
#                   ompi-default,ompi-tcp,gloo,choreo-tcp,choreo-shm)
#   ROUNDS          run every peer this many times per rank count, in turn
#                   (default 1): a table per round (merged-N.rK.txt) shows the
#                   machine's noise, and merged-N.txt has each cell's median
set -uo pipefail
cd "$(dirname "$0")/../.."
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 4)
sizes=${SIZES:-4096,65536,1048576,16777216,67108864}
ops=${OPS:-allreduce,allgather,sendrecv,alltoall,alltoallv,gather,scatter,reduce,sendrecv_batch}
peers=,${PEERS:-ompi-default,ompi-tcp,gloo,choreo-tcp,choreo-shm},
rounds=${ROUNDS:-1}
limit=${PEER_TIMEOUT:-300}
# Gloo's ops: those of $ops that gloo_bench.py has.
gloo_ops=$(tr , '\n' <<<"$ops" | grep -xE 'allreduce|allgather|sendrecv' | paste -sd, -)
[ -n "$gloo_ops" ] || peers=${peers/,gloo,/,}
want() { [[ $peers == *",$1,"* ]]; }
py=/usr/bin/python3 # Debian's, the one python3-torch installs into

missing=()
for p in openmpi-bin libopenmpi-dev python3-torch; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
    { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; } ||
    { echo "run.sh: could not install ${missing[*]}" >&2; exit 1; }
fi

out=${BENCH_RESULTS:-$(mktemp -d /tmp/choreo-peers.XXXXXX)}
mkdir -p "$out/raw" "$out/bin" || exit 1
: >"$out/failures.tsv"
printf 'ranks\tpeer\top\tsize(B)\tcount\ttype\tredop\ttime(us)\tp50(us)\talgbw GB/s\tbusbw GB/s\t#wrong\n' >"$out/rows.tsv"
echo "results in $out" >&2
{
  date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; echo "start: $(uptime)"
  mpirun --version 2>&1 | head -1
  $py -c 'import torch; print("torch", torch.__version__)' 2>&1
  go version
  git log -1 --format='choreo %h %s' 2>/dev/null; git status --short 2>/dev/null | head -20
} >"$out/env.txt"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O3 -o "$out/bin/mpi_bench" bench/peers/mpi_bench.c || { echo "run.sh: mpicc failed" >&2; exit 1; }
# The same program `go run ./cmd/demo` would build, built once so that the
# build is not timed against a peer's limit.
demo=$out/bin/demo
go build -o "$demo" ./cmd/demo 2>"$out/raw/go-build.err" || demo=
# choreo's sweep: the same sizes.
sweep=(--ops "$ops" --sizes "$sizes")
choreo=choreo note= cross=
if [ -z "$demo" ]; then
  echo "run.sh: go build ./cmd/demo failed ($out/raw/go-build.err); no choreo rows" >&2
elif "$demo" --help 2>/dev/null | grep -qE '^ +launch( |$)'; then
  cross=1 # demo launch -n N bench ...: N processes, rows from rank 0
else
  # No cross-process launcher yet: today's in-process ranks, marked as such.
  choreo=choreo-inproc
  note="NOTE: choreo-inproc = choreo's ranks as goroutines of ONE process (demo bench --ranks N): no 'demo launch' yet; not processes against processes, the ratios do not count."
fi

mpi=(mpirun --oversubscribe --mca oob_tcp_if_include lo)
tcp=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)

# peer N LABEL CMD...: one run bounded by PEER_TIMEOUT, unless PEERS leaves
# LABEL out; rows to stdout and raw/N-LABEL$round.tsv, stderr to
# raw/N-LABEL$round.err; a failure or timeout is said and recorded in
# failures.tsv.
peer() {
  local n=$1 label=$2 t0=$SECONDS rc
  shift 2
  want "$label" || return 0
  echo "== $n ranks: $label$round" >&2
  timeout -k 10 "$limit" "$@" 2>"$out/raw/$n-$label$round.err" | tee "$out/raw/$n-$label$round.tsv"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "run.sh: $label, $n ranks: TIMED OUT after ${limit}s (PEER_TIMEOUT); rows so far kept" >&2
    printf '%s\t%s\ttimeout %ss\n' "$n" "$label" "$limit" >>"$out/failures.tsv"
  elif [ "$rc" != 0 ]; then
    echo "run.sh: $label, $n ranks: FAILED (exit $rc); last lines of $out/raw/$n-$label$round.err:" >&2
    tail -5 "$out/raw/$n-$label$round.err" | sed 's/^/    /' >&2
    printf '%s\t%s\texit %s\n' "$n" "$label" "$rc" >>"$out/failures.tsv"
  fi
  echo "   $label, $n ranks: $((SECONDS - t0)) s" >&2
}

start=$SECONDS
round=
for n in "${ranks[@]}"; do
  for ((k = 1; k <= rounds; k++)); do
    [ "$rounds" = 1 ] || round=.r$k
    peer "$n" ompi-default "${mpi[@]}" -n "$n" "$out/bin/mpi_bench" ompi-default "$ops" "$sizes"
    peer "$n" ompi-tcp "${mpi[@]}" "${tcp[@]}" -n "$n" "$out/bin/mpi_bench" ompi-tcp "$ops" "$sizes"
    peer "$n" gloo $py bench/peers/gloo_bench.py -n "$n" --label gloo --ops "$gloo_ops" --sizes "$sizes"
    files=()
    for l in ompi-default ompi-tcp gloo; do
      want "$l" && files+=("$l=$out/raw/$n-$l$round.tsv")
    done
    if [ -n "$demo" ]; then
      if [ -n "$cross" ]; then
        # choreo over TCP (compared with the TCP peers) and over shared memory
        # (beside Open MPI's default), both as N processes.
        choreo=choreo-tcp
        peer "$n" choreo-tcp env CHOREO_TRANSPORT=tcp "$demo" launch -n "$n" bench "${sweep[@]}"
        peer "$n" choreo-shm env CHOREO_TRANSPORT=shm "$demo" launch -n "$n" bench "${sweep[@]}"
        for l in choreo-tcp choreo-shm; do
          want "$l" && files+=("$l=$out/raw/$n-$l$round.tsv")
        done
      else
        peer "$n" "$choreo" "$demo" bench --ranks "$n" "${sweep[@]}"
        files+=("$choreo=$out/raw/$n-$choreo$round.tsv")
      fi
    fi
    echo
    $py bench/peers/merge.py --ranks "$n" --choreo "$choreo" --tcp gloo,ompi-tcp --shm choreo-shm=ompi-default --peer-ops "gloo=$gloo_ops" \
      --ops "$ops" --sizes "$sizes" --note "$note" --tsv "$out/merged-$n$round.tsv" --rows "$out/rows.tsv" "${files[@]}" |
      tee "$out/merged-$n$round.txt"
    echo
  done
  if [ "$rounds" -gt 1 ]; then
    # The rounds' medians, cell by cell: the run's table.
    files=()
    mine=(choreo-tcp choreo-shm)
    [ -n "$cross" ] || mine=("$choreo")
    for l in ompi-default ompi-tcp gloo "${mine[@]}"; do
      want "$l" && files+=("$l=$(seq -f "$out/raw/$n-$l.r%g.tsv" 1 "$rounds" | paste -sd, -)")
    done
    $py bench/peers/merge.py --ranks "$n" --choreo "$choreo" --tcp gloo,ompi-tcp --shm choreo-shm=ompi-default --peer-ops "gloo=$gloo_ops" \
      --ops "$ops" --sizes "$sizes" --note "$note" --tsv "$out/merged-$n.tsv" "${files[@]}" | tee "$out/merged-$n.txt"
    echo
  fi
done
echo "end: $(uptime)" >>"$out/env.txt"
echo "total: $((SECONDS - start)) s; load average at start and end in $out/env.txt; results in $out" >&2
if [ -s "$out/failures.tsv" ]; then
  echo "failed peers (ranks, peer, why):" >&2
  sed 's/^/  /' "$out/failures.tsv" >&2
  exit 1
fi
