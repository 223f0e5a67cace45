"""Which TRL and transformers releases have each setting the lab tells a trainer to paste, read from their wheels.

    python -m tools.settings_releases TRL_WHEELS TRANSFORMERS_WHEELS --write

For each TRL wheel: the fields of ``trl/trainer/sft_config.py`` ``SFTConfig`` (a dataclass: its
annotated fields and defaults) and the packing strategies ``trl/data_utils.py`` compares against;
for each transformers wheel: ``DataCollatorWithFlattening.__init__``'s keyword arguments
(``tools/releases_code.py``). The first release read that has each setting, and the default
``packing_strategy`` of each range, go to ``packing_core/analysis/settings_releases.json``, which
``packing_core.analysis.trainer_advice`` reads.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

from packing_core.attention.releases import release_key
from tools.releases_code import Source, collator_kwargs

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "packing_core" / "analysis" / "settings_releases.json"
TRL_SETTINGS = ("packing", "packing_strategy", "padding_free", "max_length", "max_seq_length")


def trl_facts(wheel: Path) -> dict:
    """``{"fields": {name: default}, "strategies": [...]}`` of one TRL wheel."""
    z = zipfile.ZipFile(wheel)
    config = z.read("trl/trainer/sft_config.py").decode("utf-8")
    fields = {}
    for node in ast.walk(ast.parse(config)):
        if isinstance(node, ast.ClassDef) and node.name == "SFTConfig":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    default = None
                    if isinstance(item.value, ast.Call):
                        default = next((ast.literal_eval(k.value) for k in item.value.keywords if k.arg == "default"
                                        and isinstance(k.value, ast.Constant)), None)
                    elif isinstance(item.value, ast.Constant):
                        default = item.value.value
                    fields[item.target.id] = default
    utils = z.read("trl/data_utils.py").decode("utf-8") if "trl/data_utils.py" in z.namelist() else ""
    strategies = sorted(set(re.findall(r'strategy == "([a-z_-]+)"', utils)))
    return {"fields": fields, "strategies": strategies}


def first_with(facts: list[tuple[str, Any]], test) -> str:
    """In (release, facts) pairs, oldest first: the first release for which ``test(facts)`` holds and keeps
    holding to the newest ("" if none)."""
    since = ""
    for release, f in facts:
        if test(f):
            since = since or release
        else:
            since = ""
    return since


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trl_wheels", type=Path)
    p.add_argument("transformers_wheels", type=Path)
    p.add_argument("--write", action="store_true")
    a = p.parse_args(argv)
    trl = [(w.name.split("-")[1], trl_facts(w)) for w in sorted(a.trl_wheels.glob("trl-*.whl"),
                                                                 key=lambda w: release_key(w.name.split("-")[1]))]
    tf = [(w.name.split("-")[1], collator_kwargs(Source(w))[0]) for w in sorted(
        a.transformers_wheels.glob("transformers-*.whl"), key=lambda w: release_key(w.name.split("-")[1]))]
    out = {"about": "The first release read that has each setting (and keeps it to the newest read), from the "
                    "wheels' code: TRL's SFTConfig fields and data_utils packing strategies; transformers' "
                    "DataCollatorWithFlattening keyword arguments. Written by tools/settings_releases.py --write.",
           "trl_read": [r for r, _ in trl], "transformers_read": [r for r, _ in tf],
           "trl": {name: first_with(trl, lambda f, n=name: n in f["fields"]) for name in TRL_SETTINGS},
           "trl_strategies": {s: first_with(trl, lambda f, s=s: s in f["strategies"])
                              for s in sorted({s for _, f in trl for s in f["strategies"]})},
           "trl_default_strategy": [[r, f["fields"].get("packing_strategy")] for r, f in trl
                                    if "packing_strategy" in f["fields"]],
           "transformers_collator": {k: first_with(tf, lambda kw, k=k: k in kw)
                                     for k in sorted({k for _, kw in tf for k in kw})}}
    text = json.dumps(out, indent=1) + "\n"
    if a.write:
        OUT.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
