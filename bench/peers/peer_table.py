#!/usr/bin/env python3
"""Print the side-by-side table from run_engine_vs_llama_cpp.sh's raw.tsv.

raw.tsv rows: round, file, phase, side, value (tok/s, or unsupported/failed/missing). Each
cell is the median over rounds with the lowest and highest in brackets; the ratio is of the
medians. A llama2.c row ("decode (llama2.c ...)") is compared with Baton's decode on the same
file.
"""

import argparse
import statistics
from collections import defaultdict

WORDS = ("failed", "unsupported", "missing")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", help="raw.tsv written by run_engine_vs_llama_cpp.sh")
    args = ap.parse_args()

    vals = defaultdict(lambda: defaultdict(list))  # (file, phase) -> side -> values
    order, rounds = [], set()
    for line in open(args.raw):
        r, f, phase, side, v = line.rstrip("\n").split("\t")
        rounds.add(r)
        if phase.startswith("decode (llama2.c"):
            side = "peer"
        key = (f, phase)
        if key not in order:
            order.append(key)
        vals[key][side].append(v)

    def summary(xs):
        nums = [float(x) for x in xs if x not in WORDS]
        if not nums:
            return None, (xs[0] if xs else "-")
        m = statistics.median(nums)
        text = f"{m:.1f}" if len(nums) == 1 else f"{m:.1f} [{min(nums):.1f}-{max(nums):.1f}]"
        return m, text

    rows = []
    for f, phase in order:
        if phase == "-":
            rows.append((f, "-", "-", "missing", "missing", "-"))
            continue
        if phase.startswith("decode (llama2.c"):
            peer_name = "llama2.c"
            peer = summary(vals[(f, phase)]["peer"])
            decode = next((k for k in order if k[0] == f and k[1].startswith("decode tg")), None)
            baton = summary(vals[decode]["Baton"] if decode else [])
        else:
            peer_name = "llama.cpp"
            peer = summary(vals[(f, phase)]["llama.cpp"])
            baton = summary(vals[(f, phase)]["Baton"])
        ratio = f"{baton[0] / peer[0]:.2f}x" if peer[0] and baton[0] is not None else "-"
        rows.append((f, phase, peer_name, peer[1], baton[1], ratio))

    head = ("file", "phase", "peer", "peer tok/s", "Baton tok/s", "Baton/peer")
    w = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
    line = lambda x: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(x)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (n + 2) for n in w) + "|")
    for row in rows:
        print(line(row))
    print(f"(median [lowest-highest] over {len(rounds)} round(s) of each side's best repetition"
          " per call; ratio of the medians)")


if __name__ == "__main__":
    main()
