#!/usr/bin/env bash
# Every check that needs a CUDA GPU, in one run of at most 8 minutes, so a machine with a GPU is used once:
#   1. which GPU, driver and torch, and which backends run there;
#   2. every test marked `cuda` (varlen against each document alone, the tiny model and the
#      verifier in bfloat16, flex on CUDA);
#   3. benchmarks/attention_speed.py --device cuda --json in bfloat16 with padded, varlen, flex
#      and segments, at 256 and 8,192 support tickets;
#   4. the verifier on SmolLM2 in bfloat16 with transformers' flash_attention_2 (where flash-attn
#      is installed) and flex_attention, and with the lab's varlen and flex backends;
#   5. the fast kernels of hybrid models (causal-conv1d, mamba-ssm, flash-linear-attention, where
#      installed): does each keep packed documents apart with the signal the families table says
#      it reads (tools.families_kernels)?
# It needs python3 with a CUDA build of torch, numpy and pytest; nothing is installed or
# downloaded. Results land in $OUT (default ./gpu-check): gpu.txt, tests.log, attention_<docs>.json,
# verify.json, kernels.json, and the two files to read: gpu_check.json (everything) and README_table.md
# (the table for docs/measurements.md).
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
budget="${GPU_CHECK_BUDGET_S:-480}"     # the whole run; each step gets what is left, capped
# The SmolLM2 verifier takes minutes on a CPU, so a rehearsal skips it unless asked.
verify="${GPU_CHECK_VERIFY:-$([ "$device" = cuda ] && echo 1 || echo 0)}"
export PYTHONUNBUFFERED=1
# This checkout's package, installed or not (the GPU machine gets a bare copy of the tree).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [ "$device" = cuda ] && ! "$py" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "error: $py's torch sees no CUDA device: run scripts/gpu_check.sh on a machine with a GPU" \
       "(or rehearse with GPU_CHECK_DEVICE=cpu)" >&2
  exit 2
fi
mkdir -p "$out"
rm -f "$out"/attention_*.json "$out/verify.json" "$out/kernels.json" "$out/gpu_check.json" "$out/README_table.md"

# seconds a step may take: what is left of the budget, at most $1
left() { local cap=$1 rest=$(( budget - SECONDS )); [ "$rest" -lt "$cap" ] && cap=$rest; [ "$cap" -lt 1 ] && cap=1; echo "$cap"; }

status=0
{
  if [ "$device" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  fi
  "$py" - "$device" <<'PY'
import sys
import torch
from packing_core.attention import available_backends, flex_unavailable, varlen_function
device = sys.argv[1]
fn = varlen_function()
name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU rehearsal"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {name}")
print(f"varlen kernel: {fn.__module__}.{fn.__name__}" if fn else "varlen kernel: none")
print(f"flex: {flex_unavailable(device) or 'available'}")
print(f"backends on {device}:", ", ".join(available_backends(device)))
PY
} 2>&1 | tee "$out/gpu.txt"

echo "== every test marked cuda"
timeout "$(left 180)" "$py" -m pytest -q -m cuda -rs tests 2>&1 | tee "$out/tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

for docs in $docs_list; do
  echo "== attention benchmark, $docs documents on $device, bfloat16: padded, varlen, flex, segments"
  backends=$("$py" -c "import sys; from packing_core.attention import available_backends as a; \
print(' '.join(b for b in ('varlen', 'flex', 'segments') if b in a(sys.argv[1])))" "$device")
  if timeout "$(left 150)" "$py" benchmarks/attention_speed.py --device "$device" --dtype bfloat16 \
      --docs "$docs" --repeats 5 --backends $backends --json > "$out/attention_$docs.json"; then
    "$py" -c "import json, sys; from packing_lab.bench import format_benchmark; \
print(format_benchmark(json.load(open(sys.argv[1]))))" "$out/attention_$docs.json"
  else
    status=1
    rm -f "$out/attention_$docs.json"
  fi
done

echo "== the verifier on SmolLM2, bfloat16"
[ "$verify" = 1 ] || echo "skipped in a rehearsal (GPU_CHECK_VERIFY=1 runs it)"
[ "$verify" = 1 ] && { timeout "$(left 150)" "$py" - "$device" "$out/verify.json" <<'PY' || status=1; }
import json, sys, time
import torch
from packing_core.models import pretrained_status
from packing_core.verify import attention_arguments, verify_pretrained
device, path = sys.argv[1], sys.argv[2]
rows = []
ok, why = pretrained_status()
# transformers' own kernels get no boundaries (mask="off"): position resets and no cache are
# all they have. The lab's backends get cu_seqlens (mask="on").
paths = [("flash_attention_2", "off"), ("flex_attention", "off"), ("varlen", "on"), ("flex", "on")]
if not ok:
    rows = [{"attn": a, "status": "skipped", "why": why} for a, _ in paths]
else:
    from packing_core.models import load_pretrained
    pretrained = load_pretrained(dtype=torch.bfloat16)
    pretrained = (pretrained[0].to(device), pretrained[1])
    for attn, mask in paths:
        start = time.perf_counter()
        try:
            r = verify_pretrained(mask=mask, pretrained=pretrained, use_cache=False, **attention_arguments(attn))
            rows.append({"attn": attn, "mask": mask, "status": "ran", "equivalent": bool(r.equivalent),
                         "max_abs_diff": max(float(d.max_abs_diff) for d in r.documents),
                         "seconds": round(time.perf_counter() - start, 1)})
        except ValueError as e:     # a kernel that is not installed here: one line, not a failure
            rows.append({"attn": attn, "mask": mask, "status": "skipped", "why": str(e)})
for r in rows:
    print(r)
json.dump(rows, open(path, "w"), indent=2)
sys.exit(0 if all(r.get("equivalent", True) for r in rows) else 1)
PY

echo "== fast kernels of hybrid models: the boundary signal each reads"
timeout "$(left 90)" "$py" - "$device" "$out/kernels.json" <<'PY' || status=1
import json, sys
from tools.families_kernels import check_kernels
rows = [c.to_dict() for c in check_kernels(sys.argv[1])]
for r in rows:
    print(f"{r['kernel']} ({r['package']}, {r['signal']}): {r['status']}" + (f": {r['why']}" if r["why"] else ""))
json.dump(rows, open(sys.argv[2], "w"), indent=2)
sys.exit(1 if any(r["status"] == "disagrees" for r in rows) else 0)
PY

# One JSON file and one Markdown table (for docs/measurements.md) from what the steps left.
"$py" - "$out" "$status" "$SECONDS" <<'PY'
import json, pathlib, sys
from packing_lab.bench import BenchmarkResult
out, status, seconds = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tests = (out / "tests.log").read_text().strip().splitlines() if (out / "tests.log").exists() else []
bench = {p.stem.split("_")[1]: json.loads(p.read_text()) for p in sorted(out.glob("attention_*.json"))}
verify = json.loads((out / "verify.json").read_text()) if (out / "verify.json").exists() else []
kernels = json.loads((out / "kernels.json").read_text()) if (out / "kernels.json").exists() else []
gpu = (out / "gpu.txt").read_text().strip().splitlines() if (out / "gpu.txt").exists() else []
json.dump({"gpu": gpu, "tests": tests[-1:] , "attention": bench, "verify": verify, "kernels": kernels,
           "passed": status == 0, "seconds": seconds}, open(out / "gpu_check.json", "w"), indent=2)
lines = ["| tickets | layout | tokens/s (best of 5) | speed-up over padded | share of its own bound |",
         "| --- | --- | --- | --- | --- |"]
for docs, d in bench.items():
    r = BenchmarkResult.from_dict(d)
    lines.append(f"| {docs} | padded SDPA | {r.padded.tokens_per_s:,.0f} | 1.0x | |")
    for name, b in r.backends.items():
        lines.append(f"| {docs} | `{name}` | {b.tokens_per_s:,.0f} | {b.speedup:.1f}x | "
                     f"{b.of_flop_ratio:.2f} of {b.flop_ratio:.1f}x ({b.bound}) |")
lines += ["", "| SmolLM2 path | verdict |", "| --- | --- |"]
for v in verify:
    verdict = (("EQUIVALENT" if v["equivalent"] else "NOT EQUIVALENT") + f", max diff {v['max_abs_diff']:.2g}"
               if v["status"] == "ran" else "skipped: " + v["why"])
    lines.append(f"| `{v['attn']}` | {verdict} |")
lines += ["", "| fast kernel | signal | verdict |", "| --- | --- | --- |"]
for k in kernels:
    lines.append(f"| `{k['kernel']}` ({k['package']}) | `{k['signal']}` | {k['status']}" + (f": {k['why']}" if k["why"] else "") + " |")
machine = next((line for line in gpu if line.startswith("torch ")), "an unnamed machine")
lines += ["", f"Measured by scripts/gpu_check.sh on {machine}, in {seconds} s."]
(out / "README_table.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY

verdict=$([ $status -eq 0 ] && echo 'every step passed' || echo 'a step failed')
[ "$device" = cuda ] || verdict="$verdict (rehearsal on $device: the CUDA tests skipped)"
echo "gpu_check: $verdict in ${SECONDS} s; results in $out/ (gpu_check.json, README_table.md)"
exit $status
