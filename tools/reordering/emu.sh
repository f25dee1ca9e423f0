#!/usr/bin/env bash
# Issue 50 through the emulator, with real processes (root): each stack downloads 20 MB
# from itself over 40 Mb/s, 10 ms one way, one-BDP queues, without and with 1 ms of jitter
# that lets packets overtake each other on the downlink; REPS repetitions each. Prints each
# run's goodput line; `emu_summary.py LOG` gives each stack's share of its goodput without
# jitter. Stacks: qfec with --reordering fixed and adaptive, quinn-peer and (when given)
# the quic-go peer (peers/quic-go/build.sh DIR builds it).
#
#   tools/reordering/emu.sh target/release/qfec target/release/quinn-peer [QUIC_GO_PEER] [REPS] > log
set -euo pipefail
qfec="$(realpath "${1:?usage: emu.sh QFEC QUINN_PEER [QUIC_GO_PEER] [REPS]}")"
quinn="$(realpath "${2:?usage: emu.sh QFEC QUINN_PEER [QUIC_GO_PEER] [REPS]}")"
quicgo="${3:-}"
reps="${4:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/www"
head -c 20000000 /dev/urandom >"$work/www/f.bin"
for jitter in 0ms 1ms; do
    cat >"$work/link-$jitter.toml" <<TOML
name = "emu-reordering"
[link.down]
rate = "40Mbps"
delay = "10ms"
jitter = "$jitter"
reorder = true
queue = "bdp"
[link.up]
rate = "40Mbps"
delay = "10ms"
queue = "bdp"
TOML
done
run() {
    local stack="$1" jitter="$2" server="$3" client="$4"
    local line
    line=$("$qfec" emu "$work/link-$jitter.toml" --server "$server" -- sh -c "$client" 2>&1 |
        grep -E '^total ' | head -1 || true)
    echo "$stack jitter=$jitter ${line:-failed}"
}
url="https://10.77.0.1:4433/f.bin"
listen='--listen $QFEC_EMU_SERVER:4433'
for rep in $(seq "$reps"); do
    for jitter in 0ms 1ms; do
        for mode in fixed adaptive; do
            run "qfec-$mode" "$jitter" \
                "exec $qfec server --reordering $mode $listen --root $work/www" \
                "$qfec client --reordering $mode --insecure --timeout 200 $url"
        done
        run quinn "$jitter" "exec $quinn server $listen --root $work/www" \
            "$quinn client --insecure $url"
        if [ -n "$quicgo" ]; then
            run quic-go "$jitter" "exec $quicgo server $listen --root $work/www" \
                "$quicgo client --insecure $url"
        fi
    done
done
