#!/usr/bin/env bash
# Builds the quic-go peer as DIR/quic-go-peer from the modules pinned in go.mod and go.sum,
# fetched through the Go module proxy. Needs Go 1.26 or newer (quic-go v0.65's minimum).
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR (builds DIR/quic-go-peer)" >&2
    exit 2
fi
if ! command -v go >/dev/null; then
    echo "go not found: install Go 1.26 or newer" >&2
    exit 1
fi
mkdir -p "$1"
out="$(cd "$1" && pwd)/quic-go-peer"
cd "$(dirname "$0")"
# GOTOOLCHAIN=local: an older Go says so rather than trying to download a newer one.
GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false -o "$out" .
echo "$out"
