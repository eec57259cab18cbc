#!/usr/bin/python3
"""merge.py: one side-by-side table from the peers' rows (see run.sh, README.md).

    merge.py --ranks N [--choreo LABEL] [--tcp gloo,ompi-tcp] [--shm choreo-shm=ompi-default]
             [--ops ...] [--sizes ...] [--tsv FILE] [--rows FILE] [--note TEXT] LABEL=ROWS_FILE...

Each ROWS_FILE holds one peer's output: rows in demo bench's columns
(op size(B) count type redop time(us) p50(us) algbw busbw #wrong), with or without a
peer label in front, tab- or space-separated (demo bench pads with spaces); other
lines (headers, memcpy lines, comments) are skipped. Rows are matched by op and
size. Prints an aligned table (and writes it as TSV to --tsv) with each peer's busbw
and p50 and the ratios choreo / best TCP peer: busbw over the highest TCP busbw
(> 1: choreo moves more), p50 over the lowest TCP p50 (< 1: choreo is faster);
with --shm MINE=REF, also MINE / REF (choreo over shared memory against Open MPI's
default, shared memory too). A ROWS_FILE may be several files joined by commas (one
peer's rounds): each row's busbw and p50 are then the medians over the files that have
it (each on its own), #wrong the largest, and the title says how many rounds.
"""

import argparse
import sys

OPS = ("allreduce", "allgather", "sendrecv", "alltoall", "alltoallv", "gather", "scatter", "reduce",
       "sendrecv_batch")


def num(s):
    try:
        return float(s)
    except ValueError:
        return None


def parse(path):
    """(op, size) -> row dict, from any text holding demo bench rows."""
    rows = {}
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return rows
    with f:
        for line in f:
            tok = line.split()
            for i, t in enumerate(tok):
                if t not in OPS:
                    continue
                rest = tok[i + 1:i + 10]
                if len(rest) < 9 or not rest[0].isdigit():
                    break
                vals = [num(rest[k]) for k in (4, 5, 6, 7, 8)]
                if any(v is None for v in vals):
                    break
                rows[(t, int(rest[0]))] = dict(time=vals[0], p50=vals[1], algbw=vals[2], busbw=vals[3],
                                               wrong=int(vals[4]), raw=[t] + rest)
                break
    return rows


def median(vals):
    v = sorted(vals)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


def parse_rounds(paths):
    """parse over one peer's rounds: (op, size) -> the median row (busbw, p50 and time
    each the median of the rounds that have the row; #wrong the largest)."""
    runs = [parse(p) for p in paths]
    if len(runs) == 1:
        return runs[0]
    rows = {}
    for key in {k for r in runs for k in r}:
        have = [r[key] for r in runs if key in r]
        m = {f: median([h[f] for h in have]) for f in ("time", "p50", "algbw", "busbw")}
        m["wrong"] = max(h["wrong"] for h in have)
        m["raw"] = have[0]["raw"][:5] + [f"{m['time']:.1f}", f"{m['p50']:.1f}", f"{m['algbw']:.3f}",
                                         f"{m['busbw']:.3f}", str(m["wrong"])]
        m["rounds"] = len(have)
        rows[key] = m
    return rows


def human(b):
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << k and b % (1 << k) == 0:
            return f"{b >> k} {unit}"
    return f"{b} B"


def fmt(v, digits):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--choreo", default="choreo", help="label of choreo's rows")
    ap.add_argument("--tcp", default="gloo,ompi-tcp", help="labels of the TCP peers")
    ap.add_argument("--peer-ops", action="append", default=[], metavar="LABEL=OP,OP",
                    help="the only ops LABEL runs: its missing rows of other ops are not flagged")
    ap.add_argument("--shm", default="", help="MINE=REF: add the ratios MINE / REF (e.g. choreo-shm=ompi-default)")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--sizes", default="4096,65536,1048576,16777216,67108864")
    ap.add_argument("--tsv", help="also write the table here as TSV")
    ap.add_argument("--note", default="", help="a line printed under the title")
    ap.add_argument("--rows", help="append every peer's rows (all sizes) here as TSV: ranks, peer, row")
    ap.add_argument("peers", nargs="+", metavar="LABEL=FILE")
    a = ap.parse_args()
    labels, data, rounds = [], {}, 1
    for p in a.peers:
        label, _, path = p.partition("=")
        labels.append(label)
        paths = path.split(",")
        rounds = max(rounds, len(paths))
        data[label] = parse_rounds(paths)
    tcp = [t for t in a.tcp.split(",") if t in data]
    runs = {l: set(ops.split(",")) for l, _, ops in (p.partition("=") for p in a.peer_ops)}
    if a.rows:
        with open(a.rows, "a", encoding="utf-8") as f:
            for l in labels:
                for key in sorted(data[l], key=lambda k: (OPS.index(k[0]), k[1])):
                    f.write("\t".join([str(a.ranks), l] + data[l][key]["raw"]) + "\n")
    header = ["op", "size(B)"]
    for l in labels:
        header += [f"{l} GB/s", f"{l} p50us"]
    header += [f"{a.choreo}/bestTCP busbw", f"{a.choreo}/bestTCP p50"]
    mine, _, ref = a.shm.partition("=")
    shm = bool(mine and ref)
    if shm:
        header += [f"{mine}/{ref} busbw", f"{mine}/{ref} p50"]
    header += ["check"]
    table = []
    for op in a.ops.split(","):
        for size in (int(s) for s in a.sizes.split(",")):
            row = [op, size]
            wrong = []
            for l in labels:
                r = data[l].get((op, size))
                row += [fmt(r and r["busbw"], 3), fmt(r and r["p50"], 1)]
                if r is None:
                    if op in runs.get(l, {op}):
                        wrong.append(f"{l}: no row")
                elif r["wrong"]:
                    wrong.append(f"{l}: {r['wrong']} wrong")
            c = data.get(a.choreo, {}).get((op, size))
            t = [data[l][(op, size)] for l in tcp if (op, size) in data[l]]
            bw = c["busbw"] / max(r["busbw"] for r in t) if c and t and max(r["busbw"] for r in t) > 0 else None
            lat = c["p50"] / min(r["p50"] for r in t) if c and t and min(r["p50"] for r in t) > 0 else None
            row += [fmt(bw, 2), fmt(lat, 2)]
            if shm:
                m, f = data.get(mine, {}).get((op, size)), data.get(ref, {}).get((op, size))
                row += [fmt(m["busbw"] / f["busbw"] if m and f and f["busbw"] > 0 else None, 2),
                        fmt(m["p50"] / f["p50"] if m and f and f["p50"] > 0 else None, 2)]
            row += ["; ".join(wrong) or "ok"]
            table.append(row)
    title = (f"{a.ranks} ranks, float32; "
             + (f"each cell the median of {rounds} rounds; " if rounds > 1 else "")
             + "GB/s = busbw (nccl-tests), p50us = median per-op latency; "
             f"ratios: {a.choreo} / best of {','.join(tcp) or '(no TCP peer)'}"
             + (f", {mine} / {ref}" if shm else "") + " (busbw > 1 and p50 < 1: the first better)")
    out = [title] + ([a.note] if a.note else [])
    text = [header] + [[r[0], human(r[1])] + r[2:] for r in table]
    widths = [max(len(str(r[i])) for r in text) for i in range(len(header))]
    for r in text:
        cells = [str(c).ljust(widths[i]) if i < 2 or i == len(r) - 1 else str(c).rjust(widths[i])
                 for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    print("\n".join(out))
    if a.tsv:
        with open(a.tsv, "w", encoding="utf-8") as f:
            f.write(f"# {title}\n" + (f"# {a.note}\n" if a.note else ""))
            for r in [header] + table:
                f.write("\t".join(str(c) for c in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
