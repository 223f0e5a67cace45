"""What each transformers release does with a packed batch: the readers' rules, keyed by release range.

The rules that decide whether a packed batch leaks changed between releases. This module is
the one place that knows which release does what; every other module asks it for a
:class:`ReaderRules` and reads its fields (no code elsewhere branches on a version string).
The data (``releases_table.json``) is read from each release's own code by
``tools/releases_code.py`` and measured by ``tools/releases_table.py`` (a tiny model of each
representative family, alone vs packed, in one virtual environment per release):

- **packed detection** (``masking_utils._preprocess_mask_arguments`` ->
  ``find_packed_sequence_indices``; transformers PR #39194, merged 2025-07-03, first shipped in
  4.53.1): sdpa, eager and flex split a row at every position step that is not +1, only with no
  2D mask and no cache. Before it, position resets isolate nothing under sdpa or eager;
- **flash attention's position-ids path** (``modeling_flash_attention_utils._flash_attention_forward``):
  which batches it infers sequences from (any number of rows, flattened, or one row only), on
  which trigger, and where a sequence starts (position 0, or the row's minimum);
- **flash attention's varlen kwargs**: ``cu_seq_lens_q/_k`` with ``max_length_q/_k`` (none before
  4.47; with ``position_ids`` only until 4.53.0; all four on their own from 4.53.1);
- ``DataCollatorWithFlattening``'s keyword arguments, and the model-building API
  (``torch_dtype`` or ``dtype``; how the attention implementation is switched).

A release outside the read and measured range gets the nearest range's rules with
``covered=False``: a check then says "not measured", never SOUND.

>>> r = release_rules("4.46.3")
>>> r.packed_detection, r.flash_varlen, r.covered
(False, 'none', True)
>>> release_rules("5.24.0").packed_detection
True
>>> release_rules("4.40.0").covered
False
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

from packing_core._validate import InputError

TABLE_FILE = Path(__file__).with_name("releases_table.json")   # data, written by tools/releases_table.py --write
# flash attention's position-ids path: variant -> (rows it reads, trigger, where a sequence starts)
FLASH_POSITIONS = {
    "any_rows_last_not_end_zero": ("any", "last_not_end", "zero"),
    "any_rows_not_monotone_zero": ("any", "not_monotone", "zero"),
    "one_row_not_monotone_zero": ("one", "not_monotone", "zero"),
    "any_rows_always_zero": ("any", "always", "zero"),
    "one_row_not_arange_zero": ("one", "not_arange", "zero"),
    "one_row_not_arange_min": ("one", "not_arange", "min"),
}
FLASH_VARLEN = ("none", "needs_position_ids", "all_four")
MASK_CALLS = ("absent", "own", "blind", "sees")     # a family's mask call in one release (tools/releases_code.py)


def release_key(release: str) -> tuple[int, ...]:
    """``"4.46.3"`` -> ``(4, 46, 3)``; a pre-release or local suffix is dropped (``5.0.0rc1`` -> ``(5, 0, 0)``).

    >>> release_key("4.57.6"), release_key("5.0.0.dev0"), release_key("4.46")
    ((4, 57, 6), (5, 0, 0), (4, 46, 0))
    """
    return _parsed(release)[0]


def _parsed(release: str) -> tuple[tuple[int, ...], str]:
    """``release`` as its number and its suffix (``"5.24.0rc1"`` -> ``((5, 24, 0), "rc1")``); ASCII digits only."""
    m = re.fullmatch(r"\s*v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?([.+-]?[A-Za-z][0-9A-Za-z.+-]*)?\s*", str(release),
                     re.ASCII)
    if not m or len(str(release)) > 64:
        raise InputError(f"transformers release {str(release)[:40]!r} is not a version: give one like 4.46.3")
    return (int(m[1]), int(m[2]), int(m[3] or 0)), (m[4] or "").lstrip(".+-").lower()


def installed_release() -> str:
    """The transformers release installed here (its distribution metadata; transformers is not imported)."""
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class ReaderRules:
    """What one transformers release's readers do with a batch (fields as ``tools/releases_code.py`` reads them)."""

    release: str                      # the release judged for
    first: str                        # the range these rules were read over: first and last release read
    last: str
    covered: bool                     # inside a read range with a measured release
    installed: bool                   # the release installed here
    packed_detection: bool
    detection_gate: str
    flash_positions: str
    flash_varlen: str
    flex: bool
    collator_kwargs: tuple[str, ...]
    dtype_keyword: str                # "dtype" (4.56 on) or "torch_dtype"
    attention_switch: str             # "method" (set_attn_implementation), "config" or "reload"
    measured: tuple[str, ...] = ()    # the releases of this range run alone vs packed
    cites: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def flash_rows(self) -> str:
        return FLASH_POSITIONS[self.flash_positions][0]

    @property
    def flash_trigger(self) -> str:
        return FLASH_POSITIONS[self.flash_positions][1]

    @property
    def flash_starts(self) -> str:
        return FLASH_POSITIONS[self.flash_positions][2]

    @property
    def label(self) -> str:
        """``transformers 4.46.3`` (``, installed`` when it is the one here)."""
        return f"transformers {self.release}{' (installed)' if self.installed else ''}"

    @property
    def minor(self) -> str:
        return ".".join(str(x) for x in release_key(self.release)[:2])

    def cite(self, rule: str) -> str:
        return self.cites.get(rule, "")

    def to_dict(self) -> dict:
        return {"release": self.release, "range": [self.first, self.last], "covered": self.covered,
                "installed": self.installed, "packed_detection": self.packed_detection,
                "flash_positions": self.flash_positions, "flash_varlen": self.flash_varlen, "flex": self.flex,
                "measured": list(self.measured)}


@cache
def _stored() -> dict:
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))


def ranges() -> tuple[dict, ...]:
    """The table's release ranges, oldest first: ``{"from", "to", "read", "measured", "rules", "cites"}``."""
    return tuple(_stored()["ranges"])


def covered_span() -> tuple[str, str]:
    """The first and last release the table read and measured."""
    r = ranges()
    return r[0]["from"], r[-1]["to"]


def _range_of(key: tuple[int, ...]) -> tuple[dict | None, dict]:
    """(the range holding ``key`` or None, the nearest range)."""
    rs = ranges()
    for r in rs:
        if release_key(r["from"]) <= key <= release_key(r["to"]):
            return r, r
    before = [r for r in rs if release_key(r["to"]) < key]
    return None, before[-1] if before else rs[0]


def release_rules(release: str | None = None) -> ReaderRules:
    """The rules of ``release`` (None: the installed one). Outside the table: the nearest range's, ``covered=False``."""
    here = installed_release()
    if release is None:
        release = here or covered_span()[1]
    key = release_key(release)
    found, near = _range_of(key)
    rules = near["rules"]
    return ReaderRules(
        release=str(release).strip(), first=near["from"], last=near["to"],
        covered=found is not None and bool(found["measured"]),
        installed=bool(here) and _parsed(here) == _parsed(release), packed_detection=rules["packed_detection"],
        detection_gate=rules["detection_gate"], flash_positions=rules["flash_positions"],
        flash_varlen=rules["flash_varlen"], flex=rules["flex"], collator_kwargs=tuple(rules["collator_kwargs"]),
        dtype_keyword=rules["dtype_keyword"], attention_switch=rules["attention_switch"],
        measured=tuple(near["measured"]) if found is not None else (), cites=near["cites"])


def family_mask_call(model_type: str, rules: ReaderRules) -> str:
    """The family's mask call in that release: ``absent``, ``own``, ``blind`` or ``sees`` (position_ids passed).

    Read from the family's modeling code in each release (:data:`MASK_CALLS`); a family the table
    never read gives "".

    >>> family_mask_call("llama", release_rules("4.46.3")), family_mask_call("llama", release_rules("5.24.0"))
    ('own', 'sees')
    >>> family_mask_call("lfm2", release_rules("4.46.3"))
    'absent'
    """
    return _family(model_type, rules)[0]


def family_padding_free(model_type: str, rules: ReaderRules) -> str:
    """Which boundary kwargs the family's modeling code hands its mixers in that release (``seq_idx``, ...)."""
    return _family(model_type, rules)[1]


def family_position_start(model_type: str, rules: ReaderRules) -> str:
    """``padding_idx`` where the family numbers its own positions from ``padding_idx + 1`` in that release.

    >>> family_position_start("roberta", release_rules("5.24.0")), family_position_start("llama", release_rules())
    ('padding_idx', '')
    """
    return _family(model_type, rules)[2]


def _family(model_type: str, rules: ReaderRules) -> tuple[str, str, str]:
    changes = _stored()["families"].get(model_type)
    if not changes:
        return "", "", ""
    key = release_key(rules.release)
    now = ("absent", "", "")
    for since, *facts in changes:       # (first release read with these facts, mask call, padding-free, positions)
        if release_key(since) <= key:
            now = tuple((*facts, "", "")[:3])
    return now


def family_since(model_type: str) -> str:
    """The first release read in which the family's modeling code exists ("" if never read)."""
    return next((since for since, mask, *_ in _stored()["families"].get(model_type, ()) if mask != "absent"), "")


def measured_releases() -> tuple[str, ...]:
    """Every release run alone vs packed in its own venv, oldest first."""
    return tuple(sorted(_stored()["measured"], key=release_key))


def measured_cells(key: str = "llama|sdpa", setup: str = "position_ids") -> tuple[tuple[str, str, float], ...]:
    """``(release, status, max |logit diff|)`` of one measured cell (a family and implementation, a setup) by release.

    The setups (``tools/releases_probe.py``): ``position_ids`` (resets, no mask, no cache: what
    DataCollatorWithFlattening emits), ``mask_ones``, ``use_cache``, ``cu_seq_lens``, ``mask_4d``, ``none``.

    >>> dict((r, s) for r, s, _ in measured_cells())["4.46.3"], dict((r, s) for r, s, _ in measured_cells())["4.57.6"]
    ('leaks', 'sound')
    """
    out = []
    for release in measured_releases():
        row = _stored()["measured"][release].get(key)
        cell = row.get(setup) if isinstance(row, dict) else None
        if cell and cell[0] in "SL":
            out.append((release, "sound" if cell[0] == "S" else "leaks", float(cell[1:])))
    return tuple(out)


def not_measured_line(rules: ReaderRules) -> str:
    """The verdict for a release outside the measured range, in one line."""
    first, last = covered_span()
    return (f"not measured for transformers {rules.minor}: run `check --model` in that environment "
            f"(the lab's rules are read and measured for transformers {first} to {last})")
