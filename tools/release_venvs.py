"""One virtual environment per transformers release: torch 2.13 (CPU) and that release, nothing else.

    python -m tools.release_venvs VENVS 4.46.3 4.57.6 5.24.0       # build (or reuse) them
    python -m tools.release_venvs VENVS 4.46.3 --probe             # and run tools/releases_probe.py in each

A venv is ``VENVS/transformers-<release>``; it is built once and reused while its python runs
``import transformers`` at that release. ``--wheels DIR`` installs the release from wheels
already downloaded there (``pip download --no-deps transformers==X -d DIR``); its dependencies
come from the package index. The probe's JSON is kept beside the venv (``probe.json``).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import venv
from pathlib import Path

TORCH = "torch==2.13.0"
PROBE = Path(__file__).with_name("releases_probe.py")


def python_of(folder: Path) -> Path:
    return folder / "bin" / "python"


def installed(folder: Path) -> str:
    """The transformers release the venv imports, "" when it does not."""
    py = python_of(folder)
    if not py.exists():
        return ""
    done = subprocess.run([str(py), "-c", "import transformers; print(transformers.__version__)"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def build(venvs: Path, release: str, wheels: Path | None = None, log=sys.stderr) -> Path:
    """``venvs/transformers-<release>`` with torch 2.13 CPU and transformers ``release``; reused when it is there."""
    folder = Path(venvs) / f"transformers-{release}"
    if installed(folder) == release:
        return folder
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    spec = f"transformers=={release}"
    if wheels is not None:
        local = sorted(Path(wheels).glob(f"transformers-{release}-*.whl"))
        spec = str(local[0]) if local else spec
    cmd = [str(python_of(folder)), "-m", "pip", "install", "-q", "--disable-pip-version-check", TORCH, spec]
    print(f"building {folder.name}: {' '.join(cmd[3:])}", file=log)
    subprocess.run(cmd, check=True)
    if installed(folder) != release:
        raise RuntimeError(f"{folder} does not import transformers {release}")
    return folder


def probe(folder: Path, families=(), timeout: float = 900) -> dict:
    """Run tools/releases_probe.py in the venv; its JSON, also kept as ``folder/probe.json``."""
    done = subprocess.run([str(python_of(folder)), str(PROBE), *families], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed in {folder.name}: {done.stderr.strip().splitlines()[-1:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    (folder / "probe.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return data


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("venvs", type=Path, help="the folder that holds one venv per release")
    p.add_argument("releases", nargs="+")
    p.add_argument("--wheels", type=Path, help="a folder of downloaded transformers wheels")
    p.add_argument("--probe", action="store_true", help="also run tools/releases_probe.py in each")
    a = p.parse_args(argv)
    for r in a.releases:
        folder = build(a.venvs, r, a.wheels)
        if a.probe:
            data = probe(folder)
            print(f"{r}: {sum(len(v) for v in data['cells'].values())} cells", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
