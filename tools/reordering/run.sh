#!/usr/bin/env bash
# Issue 50's reordering campaign on the simulator: a bulk download over a link whose
# downlink has jitter that lets packets overtake each other (0, 0.5, 1, 2, 5, 10 ms), at 20
# and 100 Mb/s, 10 and 50 ms one way, one-BDP queues, 0 and 1 % random loss; RFC 9002's
# fixed thresholds against adaptive reordering, plain QUIC and adaptive FEC, SEEDS seeds.
# Writes OUT/runs.jsonl; `summary.py OUT` prints each point's goodput as a share of the
# same link without jitter, per variant, with the worst seed.
#
#   tools/reordering/run.sh target/release/qfec /tmp/reordering [SEEDS] [SIZE]
set -euo pipefail
qfec="${1:?usage: run.sh QFEC_BINARY OUT_DIR [SEEDS] [SIZE]}"
out="${2:?usage: run.sh QFEC_BINARY OUT_DIR [SEEDS] [SIZE]}"
seeds="${3:-10}"
size="${4:-20MB}"
mkdir -p "$out/scenarios"
rm -f "$out/runs.jsonl"
for rate in 20Mbps 100Mbps; do
    for delay in 10ms 50ms; do
        for jitter in 0ms 500us 1ms 2ms 5ms 10ms; do
            for loss in 0 1%; do
                name="r${rate}-d${delay}-j${jitter}-l${loss%\%}"
                f="$out/scenarios/$name.toml"
                cat >"$f" <<TOML
name = "$name"
duration_limit = "300s"
seeds = { base = 1, count = $seeds }

[link.down]
rate = "$rate"
delay = "$delay"
jitter = "$jitter"
reorder = true
queue = "bdp"
loss = { model = "bernoulli", p = "$loss" }

[link.up]
rate = "$rate"
delay = "$delay"
queue = "bdp"
loss = { model = "bernoulli", p = "$loss" }

[workload]
kind = "bulk"
size = "$size"
TOML
                "$qfec" lab run "$f" --reordering fixed,adaptive --fec none,adaptive \
                    --quiet --out "$out/$name.jsonl" >/dev/null
                cat "$out/$name.jsonl" >>"$out/runs.jsonl"
                rm "$out/$name.jsonl"
            done
        done
    done
done
echo "$(wc -l <"$out/runs.jsonl") runs in $out/runs.jsonl"
