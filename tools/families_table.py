"""Rebuild the families table from the installed transformers: every family, written as data the lab reads.

    python -m tools.families_table                 # the table of docs/checker-guide.md (Markdown)
    python -m tools.families_table --json          # every family, measured, as JSON
    python -m tools.families_table --write         # rewrite attention/families_table.json
    python -m tools.families_table lfm2 qwen3_next # some families only (never --write)

Each family is one model type per causal-LM class (:func:`.families_build.canonical_types`),
built tiny and measured by :func:`.families_run.measure_family`. The whole table takes a few
minutes on two CPU cores; nothing is cached or downloaded.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch
import transformers

from packing_core.attention.families import FAMILY_FIELDS, KINDS, MIXER_FIELDS, SETUPS, Family, Outcome
from packing_core.verify.families_build import canonical_types
from tools.families_run import measure_family

TABLE = Path(__file__).resolve().parents[1] / "attention" / "families_table.json"


def measure_all(model_types=None, *, progress=None) -> tuple[Family, ...]:
    """Measure ``model_types`` (default: every canonical model type), in order; ``progress(family, seconds)``."""
    out = []
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()     # the kernel fallbacks warn once per function
    try:
        for mt in model_types or canonical_types():
            start = time.perf_counter()
            fam = measure_family(mt)
            out.append(fam)
            if progress:
                progress(fam, time.perf_counter() - start)
    finally:
        transformers.logging.set_verbosity(verbosity)
    return tuple(out)


def cell(o: Outcome, errors: list[str]) -> str:
    """One measured cell as the table stores it: ``S1.2e-08``, ``L6.6e-04``, ``R<i>`` or ``-``."""
    if o.status == "unreached":
        return "-"
    if o.status in ("refused", "unmeasured"):
        if o.error not in errors:
            errors.append(o.error)
        return f"{o.status[0].upper()}{errors.index(o.error)}"
    return f"{o.status[0].upper()}{o.max_diff:.1e}"


def table_json(fams) -> str:
    """The text of ``attention/families_table.json`` for ``fams``: one family, mixer or cell a line (diffable)."""
    errors: list[str] = []
    families, mixers, cells = {}, [], {}
    for f in fams:
        families[f.model_type] = [f.causal_lm, f.modeling, f.attn_implementation, list(f.aliases), f.mask_call,
                                  f.mask_sees_resets, f.not_built]
        mixers += [[f.model_type, m.kind, m.name, m.called_from, m.kernel, list(m.receives)] for m in f.mixers]
        for kind in (*KINDS, "logits"):
            if any(k == kind for _, k, _ in f.outcomes):
                cells[f"{f.model_type}|{kind}"] = [cell(f.outcome(s, kind), errors) for s in SETUPS]
    machine = f"{platform.machine()} CPU, torch {torch.__version__}"
    head = {"about": f"What each causal-LM family of transformers {transformers.__version__} reads: measured on tiny "
                     f"random-init models (float32, {machine}), not written by hand. Written by python -m "
                     "tools.families_table --write; read by packing_core.attention.families. A cell per "
                     "setup: S<max |diff|> sound, L<max |diff|> leaks, R<i> refused with errors[i], U<i> unmeasured, "
                     "- not reached.",
            "transformers": transformers.__version__, "setups": list(SETUPS), "errors": errors,
            "family_fields": list(FAMILY_FIELDS), "mixer_fields": list(MIXER_FIELDS)}

    def block(name, items, keyed):
        rows = [(f"{json.dumps(k)}: " if keyed else "") + json.dumps(v, ensure_ascii=False) for k, v in items]
        return f'"{name}": ' + ("{" if keyed else "[") + "\n" + ",\n".join(rows) + "\n" + ("}" if keyed else "]")

    lines = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()]
    lines += [block("families", families.items(), True), block("mixers", [(None, m) for m in mixers], False),
              block("cells", cells.items(), True)]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _short(o: Outcome | None) -> str:
    if o is None:
        return ""
    if o.status in ("refused", "unreached", "unmeasured"):
        return {"refused": "refused", "unreached": "(not reached)", "unmeasured": "(unmeasured)"}[o.status]
    return "sound" if o.status == "sound" else f"**{o.max_diff:.1e}**"


def readme_table(fams) -> str:
    """The tables of docs/checker-guide.md: each family with a convolution or a recurrence, one line per layer kind; then the
    attention-only families grouped by what their attention (and their logits) do in each setup."""
    setups = " | ".join(f"`{s}`" for s in SETUPS)
    rule = " --- |" * len(SETUPS)
    hybrid = [f"| family | layers | {setups} |", f"| --- | --- |{rule}"]
    groups: dict[tuple, list[str]] = {}
    for f in fams:
        if f.not_built:
            continue
        kinds = f.kinds
        if set(kinds) - {"attention"}:
            for kind in (*kinds, "logits"):
                label = f"`{f.model_type}`" if kind == kinds[0] else ""
                hybrid.append(f"| {label} | {kind} | " + " | ".join(_short(f.outcome(s, kind)) for s in SETUPS) + " |")
            continue
        key = tuple(tuple(_word(f.outcome(s, k)) for s in SETUPS) for k in ("attention", "logits"))
        groups.setdefault(key, []).append(f.model_type)
    dense = [f"| attention layers, then logits | {setups} | families |", f"| --- |{rule} --- |"]
    for (attn, logits), names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        listed = ", ".join(f"`{n}`" for n in names)
        dense.append(f"| attention | {' | '.join(attn)} | {listed} ({len(names)}) |")
        if logits != attn:
            dense.append(f"| logits | {' | '.join(logits)} | |")
    return "\n".join(hybrid + [""] + dense)


def _word(o: Outcome | None) -> str:
    return "" if o is None else {"sound": "sound", "leaks": "leaks"}.get(o.status, o.status)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.families_table", description=__doc__.split("\n")[0])
    p.add_argument("model_types", nargs="*", help="only these families (default: all)")
    p.add_argument("--json", action="store_true", help="print every family as JSON")
    p.add_argument("--write", action="store_true", help="rewrite packing_core/attention/families_table.json")
    a = p.parse_args(argv)
    if a.write and a.model_types:
        p.error("--write rebuilds the whole table: give no model types")

    def progress(f, seconds):
        print(f"{f.model_type:28s} {seconds:5.1f} s  {f.not_built or ', '.join(f.kinds)}", file=sys.stderr)

    fams = measure_all(a.model_types or None, progress=progress)
    if a.write:
        TABLE.write_text(table_json(fams), encoding="utf-8")
        print(f"wrote {TABLE.name}: {sum(not f.not_built for f in fams)} of {len(fams)} families measured",
              file=sys.stderr)
    if a.json:
        print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                          "families": [f.to_dict() for f in fams]}, indent=1))
    elif not a.write:
        print(readme_table(fams))
    return 0


if __name__ == "__main__":
    sys.exit(main())
