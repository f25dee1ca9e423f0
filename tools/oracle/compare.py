#!/usr/bin/env python3
"""Compares two oracle directories written by run.sh: run by run (file and index), the
event hash and the main results. Exits 1 and lists the runs that differ."""
import json
import pathlib
import sys

FIELDS = ("event_hash", "completion_time_s", "packets_sent", "retransmissions")


def load(d):
    runs = {}
    for f in sorted(pathlib.Path(d).glob("*.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            key = (f.stem, r["index"], r.get("flow"))
            runs[key] = r
    return runs


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    if a.keys() != b.keys():
        print(f"different runs: {len(a)} against {len(b)}")
        sys.exit(1)
    differ = [k for k in sorted(a, key=str) if any(a[k].get(f) != b[k].get(f) for f in FIELDS)]
    for k in differ[:40]:
        ra, rb = a[k], b[k]
        print(k, ra.get("variant"), ra.get("preset"), ra.get("loss"), ra.get("seed"),
              {f: (ra.get(f), rb.get(f)) for f in FIELDS if ra.get(f) != rb.get(f)})
    print(f"{len(a) - len(differ)} of {len(a)} runs identical")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
