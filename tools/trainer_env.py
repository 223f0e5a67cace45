"""Build a trainer's environment, install the checkout into it as a user would, and run the smoke checks there.

    python tools/trainer_env.py VENV                                  # torch 2.13 (CPU) only, then the checkout
    python tools/trainer_env.py VENV --transformers 4.57.6 --trl 0.24.0 --smoke-trl

Steps: a new virtual environment at VENV; ``pip install torch==TORCH`` (the CPU build; add
``--transformers``/``--trl`` to put a trainer's own releases in first); then ``pip install <checkout>``
exactly as the README tells a trainer (Checking your trainer), and a check that it moved none of the versions already
there; then ``tools/trainer_smoke.py`` inside it. Prints one JSON object and exits 1 on any failure.
Needs a package index for what the checkout declares (numpy, safetensors, transformers).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def versions(python: Path) -> dict[str, str]:
    """``{distribution: version}`` of what is installed in the environment of ``python``."""
    out = _run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"]).stdout
    return {d["name"].lower(): d["version"] for d in json.loads(out or "[]")}


def build(venv: Path, torch: str, transformers: str | None, trl: str | None, smoke_trl: bool) -> dict:
    report: dict = {"venv": venv.name, "steps": []}

    def step(name: str, proc: subprocess.CompletedProcess, started: float) -> bool:
        ok = proc.returncode == 0
        report["steps"].append({"name": name, "ok": ok, "seconds": round(time.perf_counter() - started, 1),
                                "detail": "" if ok else (proc.stderr or proc.stdout)[-600:]})
        return ok

    t = time.perf_counter()
    if not step("python -m venv", _run([sys.executable, "-m", "venv", str(venv)]), t):
        return report
    python = venv / "bin" / "python"
    pins = [f"torch=={torch}"] + ([f"transformers=={transformers}"] if transformers else []) + \
        ([f"trl=={trl}"] if trl else [])
    t = time.perf_counter()
    if not step(f"pip install {' '.join(pins)}", _run([str(python), "-m", "pip", "install", "-q", *pins]), t):
        return report
    before = versions(python)
    t = time.perf_counter()
    if not step("pip install <checkout>", _run([str(python), "-m", "pip", "install", "-q", str(ROOT)], cwd=venv), t):
        return report
    after = versions(python)
    moved = {k: (before[k], after.get(k)) for k in before if after.get(k) != before[k]}
    report["steps"].append({"name": "the install moved no version already there", "ok": not moved,
                            "seconds": 0.0, "detail": json.dumps(moved)})
    report["installed"] = {k: after[k] for k in ("torch", "transformers", "trl", "numpy", "packing-lab") if k in after}
    t = time.perf_counter()
    smoke = _run([str(python), str(ROOT / "tools" / "trainer_smoke.py"), *(["--trl"] if smoke_trl else [])], cwd=venv)
    step("tools/trainer_smoke.py in the new environment", smoke, t)
    try:    # a trainer prints its own lines (TRL's metrics dict) before the report: read from the report's start
        report["smoke"] = json.loads(smoke.stdout[smoke.stdout.index('{\n "python"'):])["checks"]
    except (ValueError, KeyError):
        report["smoke"] = []
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("venv", type=Path)
    p.add_argument("--torch", default="2.13.0")
    p.add_argument("--transformers")
    p.add_argument("--trl")
    p.add_argument("--smoke-trl", action="store_true", help="run a real SFTTrainer with the callback (needs --trl)")
    args = p.parse_args(argv)
    if args.venv.exists():
        raise SystemExit(f"error: {args.venv} exists; give a new folder")
    report = build(args.venv, args.torch, args.transformers, args.trl, args.smoke_trl)
    print(json.dumps(report, indent=1))
    ok = all(s["ok"] for s in report["steps"]) and all(c["ok"] for c in report.get("smoke", [])) and report.get("smoke")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
