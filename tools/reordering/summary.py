#!/usr/bin/env python3
"""Goodput under reordering as a share of the same link without jitter (the same variant
and seed), per point and variant: mean and worst seed; runs that did not complete count
as 0. Also spurious retransmissions as a share of packets sent."""
import collections
import json
import pathlib
import sys


def main():
    runs = [json.loads(l) for l in (pathlib.Path(sys.argv[1]) / "runs.jsonl").open()]
    base = {}
    for r in runs:
        rate, delay, jitter, loss = r["scenario"].split("-")
        key = (rate, delay, loss, r["variant"], r["seed"])
        if jitter == "j0ms":
            base[key] = r
    table = collections.defaultdict(list)
    for r in runs:
        rate, delay, jitter, loss = r["scenario"].split("-")
        b = base[(rate, delay, loss, r["variant"], r["seed"])]
        share = (r["goodput_bps"] or 0) / b["goodput_bps"] if r["completed"] else 0.0
        spurious = r["spurious_retransmissions"] / max(1, r["packets_sent"])
        table[(rate, delay, loss, jitter, r["variant"])].append((share, spurious))
    order = {"j0ms": 0, "j500us": 1, "j1ms": 2, "j2ms": 3, "j5ms": 4, "j10ms": 5}
    variants = sorted({k[4] for k in table})
    print("| link | loss | jitter | " + " | ".join(variants) + " |")
    print("|---|---|---|" + "---:|" * len(variants))
    for key in sorted({k[:4] for k in table}, key=lambda k: (k[0], k[1], k[2], order[k[3]])):
        cells = []
        for v in variants:
            xs = table[key + (v,)]
            mean = sum(s for s, _ in xs) / len(xs)
            worst = min(s for s, _ in xs)
            spur = sum(p for _, p in xs) / len(xs)
            cells.append(f"{mean:.2f} ({worst:.2f}) {100 * spur:.1f}%")
        rate, delay, loss, jitter = key
        print(f"| {rate[1:]} {delay[1:]} | {loss[1:]} | {jitter[1:]} | " + " | ".join(cells) + " |")
    print("\ncell: mean goodput share of the same variant, link and seed without jitter "
          "(worst seed), spurious losses per packet sent")


if __name__ == "__main__":
    main()
