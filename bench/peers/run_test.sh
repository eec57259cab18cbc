#!/usr/bin/env bash
# Tests run.sh's promises that need no peer installed, with real processes:
#
#   - without --install it installs nothing: the peers' tools hidden from
#     PATH, apt-get and sudo replaced by stand-ins that record being called,
#     it exits 3 before making a results directory, printing the command;
#   - with --install it runs that command (the stand-in records it);
#   - Ctrl-C (SIGINT to its process group, as a terminal sends it) and
#     SIGTERM (to the script alone) stop the choreo peer it runs, `demo
#     launch` and its ranks, and it exits 130 or 143.
#
#   bash bench/peers/run_test.sh   # builds ./cmd/demo once, or DEMO=path
#
# Prints "N passed, N failed" last; exits 1 when a check failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/choreo-peers-test.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { # check WHAT COMMAND...: one check, passed when COMMAND succeeds
  local what=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok   $what"
  else
    failed=$((failed + 1))
    echo "FAIL $what"
  fi
}

# A PATH without Open MPI: links to every command of the usual
# directories but mpirun and mpicc, behind stand-ins for apt-get and sudo.
mkdir -p "$tmp/bin" "$tmp/sys"
for d in /usr/local/bin /usr/bin /bin; do
  for f in "$d"/*; do
    case ${f##*/} in mpirun* | mpicc* | mpiexec* | orterun*) continue ;; esac
    [ -e "$tmp/sys/${f##*/}" ] || ln -s "$f" "$tmp/sys/${f##*/}"
  done
done
for f in apt-get sudo; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/installed"\n[ "%s" = sudo ] && exec "$@"\nexit 0\n' "$f" "$tmp" "$f" >"$tmp/bin/$f"
  chmod +x "$tmp/bin/$f"
done
nompi=$tmp/bin:$tmp/sys:$(dirname "$(command -v go || echo /usr/local/go/bin/go)")

# 1. Nothing installed without --install.
PATH=$nompi BENCH_RESULTS=$tmp/res1 PEERS=ompi-tcp,choreo-tcp bash bench/peers/run.sh 2 >"$tmp/out1" 2>"$tmp/err1"
rc=$?
check "missing tools: exit 3 (got $rc)" test "$rc" = 3
check "missing tools: names them" grep -q '^run.sh: missing for the peers asked (ompi-tcp,choreo-tcp): mpirun, mpicc; nothing was installed.$' "$tmp/err1"
check "missing tools: prints the install command" grep -qE '^run.sh: install with:  (sudo )?apt-get update && (sudo )?apt-get install -y openmpi-bin libopenmpi-dev$' "$tmp/err1"
check "missing tools: installed nothing" test ! -e "$tmp/installed"
check "missing tools: made no results directory" test ! -e "$tmp/res1"
[ "$failed" = 0 ] || sed 's/^/    /' "$tmp/err1"

# 2. --install runs the command (the stand-in's), then goes on (here to
# mpicc, still missing: exit 1).
PATH=$nompi BENCH_RESULTS=$tmp/res2 PEERS=ompi-tcp bash bench/peers/run.sh --install 2 >"$tmp/out2" 2>"$tmp/err2"
rc=$?
check "--install: ran apt-get install" grep -q 'apt-get install -y openmpi-bin libopenmpi-dev' "$tmp/installed"
check "--install: went on past the check (exit 1 at mpicc, got $rc)" test "$rc" = 1

# 3 and 4. Signals stop the peer. The choreo peer runs a demo copied to a
# path of this test's own, so that its processes (timeout, demo launch,
# the ranks) are told from any other; apt-get and sudo are the stand-ins
# here too, so that a run.sh that installs installs nothing.
demo=$tmp/demo
if [ -n "${DEMO:-}" ]; then
  cp "$DEMO" "$demo"
else
  echo "building ./cmd/demo" >&2
  go build -o "$demo" ./cmd/demo || { echo "FAIL go build ./cmd/demo"; exit 1; }
fi
mine() { pgrep -f -- "$demo" >/dev/null; }
none_left() { ! mine; }
none_running() { ! kill -0 "$1" 2>/dev/null; }
# interrupt SIGNAL TO WANT: run run.sh in a process group of its own with
# SIGINT at its default (as at a terminal), wait for the peer's ranks, then
# send SIGNAL to TO (group: the process group, like Ctrl-C; script: the
# script alone); check the exit status is WANT and no process is left.
interrupt() {
  local sig=$1 to=$2 want=$3 res=$tmp/res-$1 pid rc i ranks=0
  PATH=$tmp/bin:$PATH BENCH_RESULTS=$res DEMO=$demo PEERS=choreo-tcp SIZES=67108864 PEER_TIMEOUT=600 \
    setsid python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    bash bench/peers/run.sh 2 4 >"$tmp/out-$sig" 2>"$tmp/err-$sig" &
  pid=$!
  local until=$((SECONDS + 120)) # the ranks of `demo launch` are up, 120 s at most
  while [ "$SECONDS" -lt "$until" ] && kill -0 "$pid" 2>/dev/null; do
    ranks=$(pgrep -fc -- "$demo node bench")
    [ "$ranks" -ge 2 ] && break
    sleep 0.2
  done
  check "$sig: the peer's 2 ranks were running (saw $ranks)" test "$ranks" -ge 2
  sleep 1
  if [ "$to" = group ]; then kill -"$sig" -- "-$pid"; else kill -"$sig" "$pid"; fi
  until=$((SECONDS + 60)) # run.sh gives the peer 10 s before SIGKILL
  while [ "$SECONDS" -lt "$until" ] && kill -0 "$pid" 2>/dev/null; do
    sleep 0.1
  done
  check "$sig: run.sh exited within 60 s" none_running "$pid"
  kill -KILL -- "-$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  check "$sig to the $to: exit $want (got $rc)" test "$rc" = "$want"
  check "$sig: says what it stopped" grep -q "^run.sh: SIG$sig: stopping choreo-tcp (2 ranks); results so far in $res\$" "$tmp/err-$sig"
  until=$((SECONDS + 5)) # the ranks' own exits are bounded by demo launch
  while [ "$SECONDS" -lt "$until" ] && mine; do
    sleep 0.1
  done
  check "$sig: no process of the peer is left" none_left
  if mine; then
    pgrep -af -- "$demo" | sed 's/^/    left: /'
    for p in $(pgrep -f -- "$demo"); do kill -KILL "$p"; done
  fi
  [ "$failed" = 0 ] || sed 's/^/    /' "$tmp/err-$sig"
}
interrupt INT group 130
interrupt TERM script 143

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
