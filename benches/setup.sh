#!/usr/bin/env bash
# Setup for benches/run.py: the loopback server and the load generator (Debian packages), and
# the peer clients and the chart library (PyPI) in the Python environment that has bizmsg.
#
#   . .venv/bin/activate && bash benches/setup.sh
#
# bizmsg itself is not installed here: install it as a release build first (`pip install -e .`
# builds in release mode; `maturin develop` without --release does not).
set -euo pipefail

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi

# nginx-light: the smallest nginx Debian ships; it is all the suite needs. wrk: the ceiling.
# taskset (util-linux) is part of every Debian install.
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends nginx-light wrk

python="${PYTHON:-python}"
if [ -z "${VIRTUAL_ENV:-}" ]; then
    echo "setup.sh: no virtualenv is active; installing into $($python -c 'import sys; print(sys.prefix)')" >&2
fi
"$python" -m pip install pyreqwest aiohttp httpx requests matplotlib

echo "setup.sh: done; run: python benches/run.py --quick (smoke test), python benches/run.py"
