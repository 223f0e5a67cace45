"""Write the table of what each transformers release does with a packed batch: read from each release, measured.

    python -m tools.releases_table WHEELS VENVS              # print the ranges found (nothing written)
    python -m tools.releases_table WHEELS VENVS --measure    # build a venv per range and run the probe there
    python -m tools.releases_table WHEELS VENVS --write      # write the table and docs/checker-releases.md

``WHEELS`` holds downloaded transformers wheels (``pip download --no-deps transformers==X -d WHEELS``:
the newest patch of every minor release from 4.44 on, and the first patch of each; where the two
differ, every patch between). Each is read by ``tools/releases_code.py``; consecutive releases
with the same facts form one **range**. ``VENVS`` holds one virtual environment per measured
release (``tools.release_venvs``); a range is measured when one of its releases has a
``probe.json`` there. The table (``packing_core/attention/releases_table.json``) is what
``packing_core.attention.releases`` reads.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from packing_core.attention.releases import release_key
from tools.release_venvs import build, probe
from tools.releases_code import Source, read_release
from tools.releases_doc import write_doc

ROOT = Path(__file__).resolve().parents[1]

TABLE = ROOT / "packing_core" / "attention" / "releases_table.json"
DOC = ROOT / "docs" / "checker-releases.md"
# the pull request or commit behind each change of a rule, from the releases' code and changelogs
CHANGES = {
    "packed_detection": "transformers PR #39194 (\"Add packed tensor format support for flex/sdpa/eager through the "
                        "mask\", merged 2025-07-03): masking_utils.find_packed_sequence_indices, first in 4.53.1",
    "flash_positions": "PR #31629 (4.44: position_ids into _flash_attention_forward, any batch size); 4.53.0: batch "
                       "size 1 only (the code points to #39121); 4.54: every batch with position_ids goes varlen "
                       "(see issue #39814); 4.55.1: _is_packed_sequence; PR #47525 (5.15): sequences start at the minimum "
                       "position, not 0",
    "flash_varlen": "4.47.0: cu_seq_lens_q/_k and max_length_q/_k reach _flash_attention_forward (only beside "
                    "position_ids); 4.53.1: the four kwargs on their own",
    "collator_kwargs": "DataCollatorWithFlattening: PR #31629 (4.44, return_position_ids), separator_id (4.45), PR "
                       "#36456 (return_flash_attn_kwargs, return_seq_idx; for Bamba's padding-free PR #35861), PR "
                       "#47525 (position_ids_start)",
}


def families() -> dict[str, tuple[str, bool]]:
    from packing_core.attention.families import known_families

    return {f.model_type: (f.modeling, bool(set(f.kinds) - {"attention"})) for f in known_families() if f.modeling}


def read_all(wheels: Path, cache: Path | None = None) -> list[dict]:
    """Every wheel's facts, oldest first; kept in ``cache`` (a folder) per wheel and version of the reader."""
    import hashlib

    fams = families()
    reader = hashlib.sha256((ROOT / "tools" / "releases_code.py").read_bytes()
                            + json.dumps(sorted(fams.items())).encode()).hexdigest()[:12]
    found = sorted(Path(wheels).glob("transformers-*.whl"), key=lambda w: release_key(w.name.split("-")[1]))
    out = []
    for w in found:
        kept = Path(cache) / f"facts-{w.stem}-{reader}.json" if cache else None
        if kept is not None and kept.exists():
            out.append(json.loads(kept.read_text(encoding="utf-8")))
            continue
        out.append(read_release(Source(w), fams))
        if kept is not None:
            kept.write_text(json.dumps(out[-1]), encoding="utf-8")
    return out


def group(facts: list[dict]) -> list[dict]:
    """Consecutive releases with the same rules: one range each, oldest first."""
    out: list[dict] = []
    for f in facts:
        if out and out[-1]["rules"] == f["rules"]:
            out[-1]["to"] = f["release"]
            out[-1]["read"].append(f["release"])
        else:
            out.append({"from": f["release"], "to": f["release"], "read": [f["release"]], "rules": f["rules"],
                        "cites": f["cites"], "measured": []})
    return out


def family_changes(facts: list[dict]) -> dict[str, list]:
    """Per family: ``[first release read, mask call, padding-free kwargs, own position start]`` at each change."""
    out: dict[str, list] = {}
    for f in facts:
        for mt, now in f["families"].items():
            seq = out.setdefault(mt, [])
            if not seq or seq[-1][1:] != now:
                seq.append([f["release"], *now])
    return out


def _short(c: dict) -> str:
    if "max_diff" in c:
        return f"{c['status'][0].upper()}{c['max_diff']:.1e}"
    return "R"


def attach_measured(ranges: list[dict], venvs: Path) -> dict:
    """Each range's measured releases (those with a probe.json in VENVS); the cells of each, compact."""
    cells = {}
    for r in ranges:
        for release in r["read"]:
            p = Path(venvs) / f"transformers-{release}" / "probe.json"
            if p.exists():
                data = json.loads(p.read_text(encoding="utf-8"))
                r["measured"].append(release)
                cells[release] = {k: ({s: _short(c) for s, c in v.items()} if "not_built" not in v else "not built")
                                  for k, v in data["cells"].items()}
                cells[release]["collator"] = data["collator"]
    return cells


def table_json(ranges, fams, cells) -> str:
    head = {"about": "What each transformers release does with a packed batch: its rules read from the release's own "
                     "code (tools/releases_code.py) over ranges of consecutive releases with the same rules, and "
                     "measured in one venv per range (tools/releases_probe.py: tiny random-init models, float32, "
                     "torch 2.13.0 CPU; a cell is S<max |diff|> sound, L<max |diff|> leaks, R refused). Written by "
                     "tools/releases_table.py --write; read by packing_core.attention.releases.",
            "changes": CHANGES}
    lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    lines.append('"ranges": [\n' + ",\n".join(json.dumps(r) for r in ranges) + "\n]")
    lines.append('"families": {\n' + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(fams.items()))
                 + "\n}")
    lines.append('"measured": {\n' + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in cells.items()) + "\n}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("wheels", type=Path)
    p.add_argument("venvs", type=Path)
    p.add_argument("--measure", action="store_true", help="build one venv per unmeasured range and run the probe")
    p.add_argument("--write", action="store_true", help="write the table and docs/checker-releases.md")
    a = p.parse_args(argv)
    facts = read_all(a.wheels, a.venvs)
    ranges = group(facts)
    cells = attach_measured(ranges, a.venvs)
    if a.measure:
        for r in ranges:
            if not r["measured"]:
                probe(build(a.venvs, r["to"], a.wheels))
        ranges = group(facts)
        cells = attach_measured(ranges, a.venvs)
    for r in ranges:
        print(f"{r['from']:>8} .. {r['to']:<8} measured: {', '.join(r['measured']) or 'NOT MEASURED'}", file=sys.stderr)
    if a.write:
        TABLE.write_text(table_json(ranges, family_changes(facts), cells), encoding="utf-8")
        write_doc(DOC)
        print(f"wrote {TABLE.name} ({len(ranges)} ranges) and {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
