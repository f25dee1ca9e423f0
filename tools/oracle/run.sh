#!/usr/bin/env bash
# The lab's oracle campaigns: a spread of presets, losses, congestion controllers, FEC
# codes and modes, multipath schedulers, workloads, reordering and the scenario files, run
# on the simulator. Each run's event hash (a digest of every simulator event) and its record
# go to OUT/*.jsonl; `compare.py` then tells run by run whether two builds behave the same.
# A refactor that claims "behaviour unchanged" runs this with the build before and after:
#
#   tools/oracle/run.sh /path/to/qfec-before /tmp/before
#   tools/oracle/run.sh target/release/qfec /tmp/after
#   python3 tools/oracle/compare.py /tmp/before /tmp/after
#
# About a minute on two cores.
set -euo pipefail
qfec="${1:?usage: run.sh QFEC_BINARY OUT_DIR}"
out="${2:?usage: run.sh QFEC_BINARY OUT_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
scenarios="$here/../../crates/lab/scenarios"
mkdir -p "$out"
run() {
    local name="$1"
    shift
    "$qfec" lab run "$@" --quiet --out "$out/$name.jsonl" >/dev/null
}
run presets --preset wlan,4g,3g,satellite,mss,da2gc --loss 0,2%,5% \
    --fec none,rlc,adaptive --seeds 3 --workload bulk:2MB
run cc --preset wlan --loss 0,2% --cc newreno,cubic,bbr --fec none,rlc \
    --fec-cc signal,mask --seeds 2 --workload bulk:5MB
run codes --preset mss --loss 3% --fec "xor(2,10),rs(20,10),rlc(20,2),rquic" \
    --fec-cc signal,mask,differentiate --seeds 2 --workload bulk:200kB
run multipath --preset wlan+4g --loss 1% --scheduler minrtt,redundant,fec-aware,rr \
    --seeds 2 --workload bulk:2MB
run web --preset 4g --loss 1% --workload page:flickr --fec none,adaptive --seeds 2
run realtime --preset 3g --loss 2% --workload realtime:10s --cc disabled \
    --fec "none,rlc" --seeds 2
run ackfreq --preset wlan --loss 1% --ack-frequency none,bquic,adaptive --seeds 2 \
    --workload bulk:2MB
run ecn --preset wlan --loss 0 --ecn --ecn-marking step:20kB --seeds 2 --workload bulk:2MB
run flows --preset mss --loss 0 --workload bulk:1MB --flows 2 --fec rlc,none --fec-cc mask \
    --stagger 2s --seeds 2
run reorder "$here/reorder.toml" --fec none,adaptive
for s in mss-ge wlan-4g-fading trace-outage da2gc-files realtime-ge; do
    run "scenario-$s" "$scenarios/$s.toml" --seeds 2
done
echo "oracle runs in $out: $(cat "$out"/*.jsonl | wc -l)"
