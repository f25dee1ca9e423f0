#!/usr/bin/env python3
"""Each stack's goodput with 1 ms of reordering jitter as a share of its goodput without
(means over repetitions), from the log of emu.sh."""
import collections
import re
import sys

runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) jitter=(\S+) total \d+ bytes in ([\d.]+) s \(([\d.]+) Mb/s", line)
    if m:
        runs[(m[1], m[2])].append(float(m[4]))
print("| stack | without jitter, Mb/s | 1 ms jitter, Mb/s | share | runs |")
print("|---|---:|---:|---:|---:|")
for stack in sorted({s for s, _ in runs}):
    a, b = runs.get((stack, "0ms"), []), runs.get((stack, "1ms"), [])
    if a and b:
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        print(f"| {stack} | {ma:.1f} | {mb:.1f} | {mb / ma:.2f} | {len(a)}+{len(b)} |")
