#!/usr/bin/env bash
# Makes a venv in DIR with aioquic and its dependencies at the versions pinned in
# requirements.txt, for DIR/bin/python peer.py. Needs Python 3.11 or newer.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR (makes a venv there)" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
python3 -m venv "$1"
"$1/bin/python" -m pip install --disable-pip-version-check --quiet -r "$here/requirements.txt"
"$1/bin/python" -c 'import aioquic; print("aioquic", aioquic.__version__)'
