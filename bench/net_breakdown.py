#!/usr/bin/env python3
"""Where a small device call's time goes across hosts: reads the timelines
tutti writes with TUTTI_NET_TRACE=PREFIX (src/device/net/trace.h), one file
per rank, from a job of blocking calls (tutti-perf -z 1), and prints the
median of each stage over the calls, for each direction of each pair.

  bench/net_breakdown.py PREFIX [--skip N]

Stages of a call on rank r sending its first slot to rank q:
  launch      E->L  tutti_dev_launch entered -> the kernel enqueued (host)
  start       L->K  enqueued -> the proxy sees the kernel started
  post        K->P  ... -> the proxy sees the kernel's first slot for q
  isend       P->S  ... -> the network took it
  wire        S->A  ... -> q's proxy has it (q's clock: one machine)
  finish      A->F  ... -> q's proxy sees q's kernel finished
  call        E->F  on r, its own launch to its kernel's end
The proxy's busy loop: mean time of one pass over its links while kernels run.
"""
import collections
import glob
import statistics
import sys


def load(path):
    ev = collections.defaultdict(list)
    head = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                w = line[1:].split()
                head = {w[i]: int(w[i + 1]) for i in range(0, len(w) - 1, 2)}
                continue
            k, peer, ch, slot, ns = line.split()
            ev[k].append((int(ns), int(peer), int(ch), int(slot)))
    return head, ev


def med(xs):
    return statistics.median(xs) / 1000.0 if xs else float("nan")


def main():
    args = sys.argv[1:]
    skip = 50
    if "--skip" in args:
        i = args.index("--skip")
        skip = int(args[i + 1])
        del args[i:i + 2]
    if not args:
        print(__doc__)
        return 2
    files = sorted(glob.glob(args[0] + ".*"), key=lambda p: int(p.rsplit(".", 1)[1]))
    if not files:
        print(f"net_breakdown.py: FAILED: no trace files {args[0]}.*", file=sys.stderr)
        return 1
    ranks = {}
    for p in files:
        head, ev = load(p)
        ranks[head["rank"]] = (head, ev)
    arrive = {}  # (receiver, sender, ch, slot) -> ns
    for r, (_, ev) in ranks.items():
        for ns, peer, ch, slot in ev["A"]:
            arrive[(r, peer, ch, slot)] = ns
    for r, (head, ev) in sorted(ranks.items()):
        E = [e[0] for e in ev["E"]]
        L = [e[0] for e in ev["L"]]
        K = [e[0] for e in ev["K"]]
        F = [e[0] for e in ev["F"]]
        n = min(len(E), len(L), len(K), len(F))
        posts = sorted(ev["P"])
        sends = {(p, c, s): ns for ns, p, c, s in ev["S"]}
        st = collections.defaultdict(list)
        j = 0
        for i in range(skip, n):
            st["launch"].append(L[i] - E[i])
            st["start"].append(K[i] - L[i])
            st["call"].append(F[i] - E[i])
            # This call's first posted slot: the first P at or after K[i].
            while j < len(posts) and posts[j][0] < K[i]:
                j += 1
            if j >= len(posts) or posts[j][0] > F[i]:
                continue
            ns, q, ch, slot = posts[j]
            st["post"].append(ns - K[i])
            s_ns = sends.get((q, ch, slot))
            if s_ns is None:
                continue
            st["isend"].append(s_ns - ns)
            a = arrive.get((q, r, ch, slot))
            if a is None or q not in ranks:
                continue
            st["wire"].append(a - s_ns)
            qF = [e[0] for e in ranks[q][1]["F"]]
            k = next((x for x in qF if x >= a), None)
            if k is not None:
                st["finish"].append(k - a)
        bp = head.get("busy_passes", 0)
        pass_us = head.get("busy_ns", 0) / bp / 1000.0 if bp else float("nan")
        print("rank %d (%d calls, %d measured): " % (r, n, max(0, n - skip)) +
              "  ".join("%s %.2f" % (k, med(st[k]))
                        for k in ("launch", "start", "post", "isend", "wire", "finish", "call")) +
              "  | proxy pass %.2f us (%d busy passes)" % (pass_us, bp))
    print("(medians, us; stages as in the header of bench/net_breakdown.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
