#!/usr/bin/env bash
# The Python package's tests: installs it (with its test extras) from this checkout into a
# venv (target/python-venv, or QFEC_PY_VENV) and runs pytest. Needs Python 3.10 or newer
# and Rust; pip builds the native module with maturin, reusing the workspace's target/.
# The tests compare with the CLI when it is built (target/release/qfec, or QFEC_BIN).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${QFEC_PY_VENV:-$repo/target/python-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --disable-pip-version-check --quiet "$repo/python[test]"
cd "$repo"
exec "$venv/bin/python" -m pytest -q python/tests "$@"
