#!/usr/bin/env bash
# Every check that needs a CUDA GPU, in one run, so a machine with a GPU is used once:
#   1. which GPU, driver and torch;
#   2. the tests marked `cuda` (varlen against each document alone, the tiny model and
#      the verifier in bfloat16);
#   3. benchmarks/attention_speed.py --device cuda at 256 and 8,192 support tickets.
# It needs python3 with a CUDA build of torch, numpy and pytest; nothing is installed or
# downloaded. Results land in $OUT (default ./gpu-check): gpu.txt, tests.log and
# attention_<docs>.json, with a table of each benchmark on stdout.
#
#   bash scripts/gpu_check.sh          # exit 0 when every step passed, 1 when one failed,
#                                      # 2 when torch sees no CUDA device
#   GPU_CHECK_DEVICE=cpu GPU_CHECK_DOCS=16 bash scripts/gpu_check.sh
#                                      # rehearsal on a CPU: the same steps, CUDA tests skip
set -uo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
out="${OUT:-gpu-check}"
device="${GPU_CHECK_DEVICE:-cuda}"
docs_list="${GPU_CHECK_DOCS:-256 8192}"
export PYTHONUNBUFFERED=1
# This checkout's package, installed or not (the GPU machine gets a bare copy of the tree).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [ "$device" = cuda ] && ! "$py" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "error: $py's torch sees no CUDA device: run scripts/gpu_check.sh on a machine with a GPU" \
       "(or rehearse with GPU_CHECK_DEVICE=cpu)" >&2
  exit 2
fi
mkdir -p "$out"

status=0
{
  if [ "$device" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  fi
  "$py" - "$device" <<'PY'
import sys
import torch
from packing_core import varlen_function, available_backends
device = sys.argv[1]
fn = varlen_function()
name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU rehearsal"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {name}")
print(f"varlen kernel: {fn.__module__}.{fn.__name__}" if fn else "varlen kernel: none")
print(f"backends on {device}:", ", ".join(available_backends(device)))
PY
} 2>&1 | tee "$out/gpu.txt"

echo "== tests marked cuda"
"$py" -m pytest -q -m cuda -rs tests/test_attention.py tests/test_model.py tests/test_verify.py \
  2>&1 | tee "$out/tests.log" || status=1

for docs in $docs_list; do
  echo "== attention benchmark, $docs documents on $device"
  if "$py" benchmarks/attention_speed.py --device "$device" --docs "$docs" --repeats 5 --json \
      > "$out/attention_$docs.json"; then
    "$py" -c "import json, sys; from packing_core import format_benchmark; \
print(format_benchmark(json.load(open(sys.argv[1]))))" "$out/attention_$docs.json"
  else
    status=1
  fi
done
verdict=$([ $status -eq 0 ] && echo 'every step passed' || echo 'a step failed')
[ "$device" = cuda ] || verdict="$verdict (rehearsal on $device: the CUDA tests skipped)"
echo "gpu_check: $verdict; results in $out/"
exit $status
