#!/usr/bin/env bash
# Side by side, processes against processes over loopback: Open MPI (its
# defaults, i.e. shared memory, and forced to TCP), Gloo (torch.distributed)
# and choreo's `demo launch -n N bench` (over TCP and over shared memory), in
# one run, for each rank count: all-reduce, all-gather, send/recv, all-to-all
# (even and uneven), gather, scatter, reduce and the batched ring at 4 KiB,
# 64 KiB, 1 MiB, 16 MiB and 64 MiB per rank, then one merged table per rank
# count with the ratios choreo-tcp / best TCP peer and choreo-shm / Open MPI's
# default. Not part of CI. README.md says what each column means.
#
#   bash bench/peers/run.sh [--install] [ranks...]   # default ranks: 2 4
#
# The peers asked for (PEERS) need Debian's openmpi-bin and libopenmpi-dev
# (ompi-*) and python3-torch (gloo); choreo's need go. run.sh installs
# nothing unless given --install: when something is missing it prints the
# command that installs it and exits 3. --install runs that command
# (apt-get, with sudo when not root). Ctrl-C (SIGINT) or SIGTERM stops the
# peer running (its whole process group: SIGTERM, SIGKILL 10 s later) and
# exits 130 or 143; the results so far are kept.
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
#   DEMO            a demo binary (go build ./cmd/demo) to run instead of
#                   building one
#   ROUNDS          run every peer this many times per rank count, in turn
#                   (default 1): a table per round (merged-N.rK.txt) shows the
#                   machine's noise, and merged-N.txt has each cell's median
set -uo pipefail
cd "$(dirname "$0")/../.."
out=
# The peer running: timeout's pid, which leads the peer's own process group
# (timeout puts itself in a new one, so a terminal's Ctrl-C reaches this
# script but not the peer), and what it is, for the interrupt's message.
peer_pid= peer_what=

# stop_peer: SIGTERM to the running peer's process group (and to timeout
# itself, in case it has not made its group yet), SIGKILL to what is left
# after 10 s, then reap it.
stop_peer() {
  local pid=$peer_pid i
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  peer_pid=
}

# interrupted SIGNAL STATUS: stop the peer and exit with STATUS.
interrupted() {
  trap '' INT TERM
  echo "run.sh: $1: stopping${peer_what:+ $peer_what}; results so far in ${out:-(none yet)}" >&2
  stop_peer
  exit "$2"
}
trap 'interrupted SIGINT 130' INT
trap 'interrupted SIGTERM 143' TERM

install= ranks=()
for a in "$@"; do
  case $a in
  --install) install=1 ;;
  -h | --help)
    sed -n '2,/^set -uo/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
    ;;
  *[!0-9]* | '' | 0)
    echo "run.sh: $a: not a rank count or an option (usage: run.sh [--install] [ranks...])" >&2
    exit 2
    ;;
  *) ranks+=("$a") ;;
  esac
done
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

# What the peers asked for need, and the Debian package of each: checked
# by the commands themselves, so that any install of them counts.
missing=() pkgs=()
need() { # need PACKAGE WHAT TEST...: PACKAGE is missing unless TEST succeeds
  local pkg=$1 what=$2
  shift 2
  "$@" >/dev/null 2>&1 && return 0
  missing+=("$what")
  [[ " ${pkgs[*]} " == *" $pkg "* ]] || pkgs+=("$pkg")
}
need python3 "$py (merges the tables)" test -x "$py"
if want ompi-default || want ompi-tcp; then
  need openmpi-bin mpirun command -v mpirun
  need libopenmpi-dev mpicc command -v mpicc
fi
want gloo && need python3-torch "torch for $py" "$py" -c 'import torch'
sudo=
[ "$(id -u)" = 0 ] || sudo='sudo '
install_cmd="${sudo}apt-get update && ${sudo}apt-get install -y ${pkgs[*]}"
if [ ${#pkgs[@]} -gt 0 ] && [ -z "$install" ]; then
  list=$(printf ', %s' "${missing[@]}")
  echo "run.sh: missing for the peers asked (${PEERS:-all}): ${list#, }; nothing was installed." >&2
  echo "run.sh: install with:  $install_cmd" >&2
  echo "run.sh: or run again with --install, or leave those peers out (PEERS=choreo-tcp,choreo-shm)" >&2
  exit 3
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "run.sh: --install: $install_cmd" >&2
  export DEBIAN_FRONTEND=noninteractive
  eval "$install_cmd" >&2 || { echo "run.sh: could not install ${pkgs[*]} (exit $?)" >&2; exit 3; }
fi
if [ -z "${DEMO:-}" ] && { want choreo-tcp || want choreo-shm; } && ! command -v go >/dev/null; then
  echo "run.sh: go is not on PATH (choreo's peers build ./cmd/demo with it); leave them out with PEERS, or put the Go toolchain on PATH" >&2
  exit 3
fi

out=${BENCH_RESULTS:-$(mktemp -d /tmp/choreo-peers.XXXXXX)}
mkdir -p "$out/raw" "$out/bin" || exit 1
: >"$out/failures.tsv"
printf 'ranks\tpeer\top\tsize(B)\tcount\ttype\tredop\ttime(us)\tp50(us)\talgbw GB/s\tbusbw GB/s\t#wrong\n' >"$out/rows.tsv"
echo "results in $out" >&2
{
  date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; echo "start: $(uptime)"
  { want ompi-default || want ompi-tcp; } && mpirun --version 2>&1 | head -1
  want gloo && $py -c 'import torch; print("torch", torch.__version__)' 2>&1
  command -v go >/dev/null && go version
  git log -1 --format='choreo %h %s' 2>/dev/null; git status --short 2>/dev/null | head -20
} >"$out/env.txt"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if want ompi-default || want ompi-tcp; then
  mpicc -O3 -o "$out/bin/mpi_bench" bench/peers/mpi_bench.c || { echo "run.sh: mpicc failed" >&2; exit 1; }
fi
# The same program `go run ./cmd/demo` would build, built once so that the
# build is not timed against a peer's limit (or DEMO's, built before).
if [ -n "${DEMO:-}" ]; then
  demo=$DEMO
elif want choreo-tcp || want choreo-shm; then
  demo=$out/bin/demo
  go build -o "$demo" ./cmd/demo 2>"$out/raw/go-build.err" || demo=
else
  demo=
fi
# choreo's sweep: the same sizes.
sweep=(--ops "$ops" --sizes "$sizes")
choreo=choreo note= cross=
if [ -z "$demo" ]; then
  if want choreo-tcp || want choreo-shm; then
    echo "run.sh: go build ./cmd/demo failed ($out/raw/go-build.err); no choreo rows" >&2
  fi
elif "$demo" --help 2>/dev/null | grep -E '^ +launch( |$)' >/dev/null; then # all of it read: no SIGPIPE under pipefail
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
# failures.tsv. The peer runs in the background and the script waits for
# it, so that a signal's trap runs at once, not when the peer ends.
peer() {
  local n=$1 label=$2 t0=$SECONDS rc
  shift 2
  want "$label" || return 0
  echo "== $n ranks: $label$round" >&2
  peer_what="$label ($n ranks)"
  timeout -k 10 "$limit" "$@" 2>"$out/raw/$n-$label$round.err" > >(tee "$out/raw/$n-$label$round.tsv") &
  peer_pid=$!
  wait "$peer_pid"
  rc=$?
  peer_pid= peer_what=
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
