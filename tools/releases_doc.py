"""Write docs/checker-releases.md from the releases table: the rules by release, with the measured cells.

    python -m tools.releases_doc          # rewrite docs/checker-releases.md from releases_table.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "packing_core" / "attention" / "releases_table.json"
DOC = ROOT / "docs" / "checker-releases.md"

FLASH_WORDS = {
    "any_rows_last_not_end_zero": "any rows, flattened, when a row's last position is not its width - 1; starts at 0",
    "any_rows_not_monotone_zero": "any rows, flattened, when positions ever step down; starts at 0",
    "one_row_not_monotone_zero": "one row only, when positions step down; starts at 0",
    "any_rows_always_zero": "every batch with position_ids, rows flattened; starts at 0",
    "one_row_not_arange_zero": "one row only, when positions are not one arange; starts at 0",
    "one_row_not_arange_min": "one row only, when positions are not one arange; starts at the row's minimum",
}
VARLEN_WORDS = {"none": "not read", "needs_position_ids": "read only beside position_ids",
                "all_four": "read on their own (all four)"}


def _cell(cells: dict, release: str, key: str, setup: str) -> str:
    row = cells.get(release, {}).get(key)
    if not isinstance(row, dict):
        return "-"
    c = row.get(setup, "-")
    return "refused" if c == "R" else ("sound " if c[0] == "S" else "**leaks** ") + c[1:]


def doc_text(data: dict) -> str:
    ranges, cells = data["ranges"], data["measured"]
    out = ["# What each transformers release does with a packed batch", "",
           "`check` judges a batch for one transformers release: the installed one by default "
           "(`python -m packing_core check batch.safetensors`), or the trainer's "
           "(`check --transformers 4.46.3 batch.safetensors`). The verdict line names it. The rules below are read "
           "from each release's own code (`tools/releases_code.py`, over every wheel listed in the table) and "
           "measured in one virtual environment per range (`tools/releases_table.py`: torch 2.13.0 CPU, tiny "
           "random-init models, three documents of 7, 9 and 5 tokens packed in one row, each against its run "
           "alone). A release outside the measured span is never judged SOUND: the verdict says \"not measured for "
           "transformers X.Y: run `check --model` in that environment\".", "",
           f"Span read: transformers {ranges[0]['from']} to {ranges[-1]['to']}, every wheel listed below; each range of "
           "releases with the same rules is measured on one of its releases (a range marked NOT MEASURED is judged "
           "\"not measured\", like a release outside the span).", "",
           "## The rules by release", "",
           "| releases | packed detection (sdpa, eager, flex) | flash attention from `position_ids` | "
           "`cu_seq_lens_q/_k` + `max_length_q/_k` | `DataCollatorWithFlattening` kwargs | model API | measured |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in ranges:
        ru = r["rules"]
        span = r["from"] if r["from"] == r["to"] else f"{r['from']} – {r['to']}"
        det = "**on** (no 2D mask, no cache)" if ru["packed_detection"] else "off: one causal triangle per row"
        api = f"`{ru['dtype_keyword']}=`; switch: {ru['attention_switch']}"
        out.append(f"| {span} | {det} | {FLASH_WORDS[ru['flash_positions']]} | {VARLEN_WORDS[ru['flash_varlen']]} | "
                   f"{', '.join(ru['collator_kwargs'])} | {api} | {', '.join(r['measured']) or 'NOT MEASURED'} |")
    out += ["", "Where each change comes from:", ""]
    out += [f"- **{k}**: {v}" for k, v in data["changes"].items()]
    out += ["", "## The same batch, sound on one release and leaking on another", "",
            "Three documents packed in one row, `position_ids` restarting per document, no attention mask, "
            "`use_cache=False` (what `DataCollatorWithFlattening` and TRL's padding-free packing emit). Largest "
            "|logit difference| of any document against its run alone, tiny random-init models:", "",
            "| release | llama sdpa | llama eager | mistral sdpa | opt sdpa (mask call without position_ids) | "
            "llama sdpa + all-ones 2D mask | llama sdpa, use_cache=True |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for release in sorted(cells, key=lambda v: tuple(int(x) for x in v.split("."))):
        out.append(f"| {release} | {_cell(cells, release, 'llama|sdpa', 'position_ids')} | "
                   f"{_cell(cells, release, 'llama|eager', 'position_ids')} | "
                   f"{_cell(cells, release, 'mistral|sdpa', 'position_ids')} | "
                   f"{_cell(cells, release, 'opt|sdpa', 'position_ids')} | "
                   f"{_cell(cells, release, 'llama|sdpa', 'mask_ones')} | "
                   f"{_cell(cells, release, 'llama|sdpa', 'use_cache')} |")
    out += ["", "So the batch a trainer on transformers 4.46 sends leaks there, and the same batch is sound on 4.57: "
            "`check --transformers 4.46.3 batch.safetensors` says so from any environment, and `check --model DIR` "
            "run in the trainer's environment measures it on the real model.", "",
            "## Families whose mask call changed", "",
            "Whether a family's code passes `position_ids` to `create_causal_mask` (only then do position resets "
            "reach its mask, and only from the release with packed detection). `own`: the model builds its mask "
            "itself; `blind`: `create_causal_mask` without `position_ids`; `sees`: with them. A family listed from a "
            "release on is absent before it.", "",
            "| family | mask call by release |", "| --- | --- |"]
    for mt, changes in sorted(data["families"].items()):
        steps = [(since, mask) for since, mask, *_ in changes]
        if len({m for _, m in steps if m != "absent"}) > 1:
            out.append(f"| `{mt}` | " + "; ".join(f"{m} from {s}" for s, m in steps if m != "absent") + " |")
    out += ["", "## Padding-free support of the hybrid families", "",
            "Which boundary kwargs the family's modeling file names for its convolutions and recurrences, by "
            "release (`seq_idx`, `cu_seq_lens`). `none`: the file names neither. Before 5.15 that means they never "
            "reach the mixers; from 5.15 on the hybrid families forward their keyword arguments to the kernels "
            "generically (`**kwargs` into `use_kernel_func_from_hub_with_fallback`), and what reaches each kernel "
            "is measured in the families table (README: What each model family reads), not read here. Bamba's "
            "padding-free support is transformers PR #35861; the collator's `return_seq_idx` is PR #36456.", "",
            "| family | by release |", "| --- | --- |"]
    for mt, changes in sorted(data["families"].items()):
        steps = [(since, free) for since, mask, free, *_ in changes if free and free != "absent"]
        if steps:
            merged = [steps[0]] + [s for p, s in zip(steps, steps[1:]) if s[1] != p[1]]
            out.append(f"| `{mt}` | " + "; ".join(f"{f} from {s}" for s, f in merged) + " |")
    out += ["", "## The lab in the trainer's environment", "",
            "`python -m tools.releases_model_check VENVS 4.46.3 4.57.6 5.24.0` builds a venv per release "
            "(`tools.release_venvs`), saves a tiny Llama and the batch above there, and runs `check --model` with the "
            "lab from this checkout under sdpa and eager: the model is built and called through that release's API "
            "(`torch_dtype=` before 4.56, `dtype=` after; the attention implementation fixed at load before 4.48, "
            "switched through the config or `set_attn_implementation` after: `packing_core/models/api.py`). On each "
            "of the three, the static verdict and the run agree: a leak of 3.07 under sdpa and eager on 4.46.3, "
            "sound (within 3e-6) on 4.57.6 and 5.24.0. CI runs the same check in-process on the pinned release "
            "(`tests/attention/test_releases.py`); a venv per release needs the package index and about a gigabyte "
            "and minutes each, more than CI's budget.", ""]
    out += ["", "Regenerate: `python -m tools.releases_table WHEELS VENVS --measure --write` (see the module's "
            "docstring); `tests/attention/test_releases.py` checks the installed release's row against its code "
            "and its measured cells against a run.", ""]
    return "\n".join(out)


def write_doc(path: Path = DOC) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc_text(json.loads(TABLE.read_text(encoding="utf-8"))), encoding="utf-8")


if __name__ == "__main__":
    write_doc()
    sys.exit(0)
