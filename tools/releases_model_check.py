"""The lab in a trainer's environment: `check` and `check --model` on a tiny Llama, in one venv per release.

    python -m tools.releases_model_check VENVS 4.46.3 4.57.6 5.24.0 [--wheels DIR]

For each release: the venv (``tools/release_venvs.py``; the lab's own runtime needs are added:
pyarrow, pandas, highspy) saves a tiny random-init Llama and a collator-style batch (three
documents of 7, 9 and 5 tokens, position ids restarting per document, no mask), then runs the
lab from this checkout (``PYTHONPATH``) there: ``check`` (static, for the installed release) and
``check --model`` (the batch run as given vs each document alone) under sdpa and eager. A line per
run; it fails when the static verdict and the run disagree, or when the run does not run.

CI runs the same check on the pinned release only, in-process
(``tests/attention/test_releases.py::test_check_model_runs_and_agrees_with_the_run_on_the_installed_release``):
a venv per release needs the package index and about a gigabyte and minutes each.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.release_venvs import build, python_of

ROOT = Path(__file__).resolve().parents[1]

LAB_NEEDS = ("pyarrow", "pandas", "highspy==1.15.1")
MAKE = """
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
from safetensors.torch import save_file
out = sys.argv[1]
cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                  num_hidden_layers=2, max_position_embeddings=256, initializer_range=0.1)
torch.manual_seed(0)
LlamaForCausalLM(cfg).save_pretrained(out + "/model", safe_serialization=True)
ids = torch.randint(3, 256, (1, 21), generator=torch.Generator().manual_seed(0))
pos = torch.cat([torch.arange(n) for n in (7, 9, 5)])[None]
save_file({"input_ids": ids, "position_ids": pos}, out + "/batch.safetensors")
"""


def check_release(venvs: Path, release: str, wheels: Path | None = None) -> list[str]:
    folder = build(venvs, release, wheels)
    py = str(python_of(folder))
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *LAB_NEEDS], check=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        env["PACKING_LAB_CACHE"] = tmp
        subprocess.run([py, "-c", MAKE, tmp], check=True, env=env)
        for impl in ("sdpa", "eager"):
            done = subprocess.run([py, "-m", "packing_core", "check", "--attn-implementation", impl, "--model",
                                   f"{tmp}/model", f"{tmp}/batch.safetensors"], capture_output=True, text=True, env=env)
            said = [ln for ln in done.stdout.splitlines() if ln.startswith(f"{impl}: ")]
            ok = done.returncode in (0, 1) and any("they agree" in ln for ln in said)
            told = " | ".join(said) or (done.stderr.strip().splitlines() or [""])[-1]
            lines.append(f"{release} {impl}: {'OK' if ok else 'FAIL'} exit {done.returncode}: {told}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("venvs", type=Path)
    p.add_argument("releases", nargs="+")
    p.add_argument("--wheels", type=Path)
    a = p.parse_args(argv)
    lines = [ln for r in a.releases for ln in check_release(a.venvs, r, a.wheels)]
    print("\n".join(lines))
    return 0 if all(": OK " in ln for ln in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
