"""The zoo's two types: a :class:`Bug` and the :class:`ZooResult` of reproducing one.

A tracker reference (``Bug.reported``) reads ``"owner/repo #N: what it says"``; each ``#N``
in it is a link to that issue or pull request (GitHub sends ``/issues/N`` on to a pull):

>>> reference_links("huggingface/trl #1230 / #1235 (not merged)")[:3]
(('huggingface/trl #1230', 'https://github.com/huggingface/trl/issues/1230'), (' / ', None), \
('#1235', 'https://github.com/huggingface/trl/issues/1235'))
>>> reference_links("huggingface/trl trl/trainer/sft_trainer.py compute_loss")[0][1]
'https://github.com/huggingface/trl/blob/main/trl/trainer/sft_trainer.py'
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from packing_core.check.rules import RULES

_REPO = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+) (?P<first>#\d+|[\w.-]+(?:/[\w.-]+)*\.py)")
_MORE = re.compile(r"#\d+")


def reference_links(ref: str) -> tuple[tuple[str, str | None], ...]:
    """A tracker reference cut into ``(text, url or None)`` pieces that join back into ``ref``.

    The reference must start ``owner/repo #N`` (an issue or pull) or ``owner/repo path.py`` (a
    file on main); later ``#M`` numbers (``#A -> #B``) link to the same repository.
    """
    m = _REPO.match(ref)
    if m is None:
        raise ValueError(f"tracker reference {ref!r} does not start 'owner/repo #N' or 'owner/repo path.py': "
                         "write it as, e.g., 'huggingface/trl #784: what it says'")
    repo, first = m["repo"], m["first"]
    base = f"https://github.com/{repo}"
    url = f"{base}/issues/{first[1:]}" if first.startswith("#") else f"{base}/blob/main/{first}"
    parts: list[tuple[str, str | None]] = [(m.group(0), url)]
    rest, at = ref[m.end():], 0
    head = rest.split(":", 1)[0]            # numbers after the colon are quoted text, not links
    for n in _MORE.finditer(head):
        if n.start() > at:
            parts.append((rest[at:n.start()], None))
        parts.append((n.group(0), f"{base}/issues/{n.group(0)[1:]}"))
        at = n.end()
    if at < len(rest):
        parts.append((rest[at:], None))
    return tuple(parts)


@dataclass(frozen=True)
class Bug:
    """One packing bug: what goes wrong, where it was reported, the fix, and how the lab shows it.

    ``needs`` says what ``run`` loads: ``"nothing"`` for a planted fault (``run(batch)`` returns
    the lab's PackedBatch with the bug planted), else the model (``run()`` returns a
    :class:`ZooResult`). ``caught_by`` names findings of ``check.rules``; ``example``, when set,
    returns ``(broken, fixed, check keyword arguments)`` trainer batches that need no model.
    """

    name: str
    title: str
    what: str                           # what goes wrong
    reported: tuple[str, ...]           # "owner/repo #N: what it says", from the trackers
    fix: str
    needs: str                          # "nothing" | what the reproduction runs on
    caught_by: tuple[str, ...]          # finding names (check.rules.RULES); () = no static finding sees it
    run: Callable = None
    example: Callable | None = None
    caught_note: str = ""               # how the lab catches it when no finding names it (a refusal, your code)
    read_by: str = "sdpa"               # a planted fault: the attention implementation whose check shows it

    def __post_init__(self):
        unknown = [n for n in self.caught_by if n not in RULES]
        if unknown:
            raise ValueError(f"bug {self.name}: caught_by names unknown findings {unknown}")

    @property
    def planted(self) -> bool:
        return self.needs == "nothing"

    @property
    def links(self) -> tuple[tuple[tuple[str, str | None], ...], ...]:
        """Each ``reported`` entry as :func:`reference_links` pieces, for a page to draw as links."""
        return tuple(reference_links(r) for r in self.reported)

    @property
    def caught_by_titles(self) -> tuple[str, ...]:
        """The plain-language titles of the findings that catch it, for pages."""
        return tuple(RULES[n].title for n in self.caught_by)

    @property
    def caught_words(self) -> str:
        """How the lab catches it, in words: its findings' titles, else its note, else the comparison that sees it."""
        if self.caught_by:
            return "; ".join(self.caught_by_titles)
        if self.caught_note:
            return self.caught_note
        return ("no static finding: only alone vs packed (Masks and labels page) shows it" if self.planted
                else "no static finding: only a model run shows it")

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "what": self.what, "reported": list(self.reported),
                "fix": self.fix, "needs": self.needs, "caught_by": list(self.caught_by), "caught": self.caught_words}


def _array(compare=False):
    return field(default=None, compare=compare, repr=False)


@dataclass(frozen=True)
class ZooResult:
    """One reproduction: the broken setup and the fixed one, measured and checked.

    After the sentences come the arrays its figure draws (``viz.zoo``), for one row of the
    batch, measured in the same run: ``None`` where the bug does not touch that part. Each comes
    as a ``broken_`` / ``fixed_`` pair, so a figure sets what went wrong beside the fix. For a
    causality bug (the future read, alone and packed alike) the logit differences are those the
    causality check measures: earlier logits moved by a change of later tokens.
    """

    name: str
    symptom: str                          # the measured symptom of the broken setup, in words
    fixed: str                            # the same measurement on the fixed setup
    broken_max_abs_diff: float | None     # max |dlogit| vs each document alone (None: not a logit bug)
    fixed_max_abs_diff: float | None
    changed_predictions: int | None       # top-1 next tokens changed by the bug
    caught: bool                          # the lab's check flags the broken setup
    silent_on_fix: bool                   # ... and says nothing of the fixed one
    check_says: str                       # what the check reported on the broken setup
    # what the figure draws (one row)
    document_ids: np.ndarray | None = _array()        # int [T]: each token's intended document, -1 a pad
    input_ids: np.ndarray | None = _array()           # int [T]: the row's tokens
    tokens: tuple[str, ...] = ()                       # each token as text, for cells and hover
    tolerance: float | None = None                     # the alone-vs-packed tolerance of the diffs
    broken_token_diffs: np.ndarray | None = _array()  # float [T]: max |logit packed - logit alone| per token
    fixed_token_diffs: np.ndarray | None = _array()
    broken_mask: np.ndarray | None = _array()         # bool [T, T]: the keys each query reads
    fixed_mask: np.ndarray | None = _array()          # ... in the fixed setup: the intended documents
    broken_targets: np.ndarray | None = _array()      # int [T]: the token trained at each position, -100 none
    fixed_targets: np.ndarray | None = _array()
    broken_position_ids: np.ndarray | None = _array()  # int [T] (a bug may give fewer than the tokens)
    fixed_position_ids: np.ndarray | None = _array()
    broken_segments: np.ndarray | None = _array()     # int [T]: the sequence the model's code finds per token
    fixed_segments: np.ndarray | None = _array()
    weight_labels: tuple[str, ...] = ()                # one per document: its row, index and token count
    broken_weights: np.ndarray | None = _array()      # float [documents]: its share of the gradient
    fixed_weights: np.ndarray | None = _array()
    layer_kinds: tuple[str, ...] = ()                  # the layers beyond attention whose outputs are compared
    broken_layer_diffs: np.ndarray | None = _array()  # float [kinds, T]: each layer's output vs alone, per token
    fixed_layer_diffs: np.ndarray | None = _array()
    broken_launch: np.ndarray | None = _array()       # int [2]: max_seqlen, and the queries flash-attn covers per
    fixed_launch: np.ndarray | None = _array()        #   document (ceil(max_seqlen / block) x block)

    @property
    def drawn(self) -> tuple[str, ...]:
        """What its figure shows: ``"logits"``, ``"mask"``, ``"targets"``, ``"positions"``, ``"weights"``,
        ``"layers"``, ``"launch"``."""
        parts = {"logits": self.broken_token_diffs, "mask": self.broken_mask, "targets": self.broken_targets,
                 "positions": self.broken_position_ids, "weights": self.broken_weights,
                 "layers": self.broken_layer_diffs, "launch": self.broken_launch}
        return tuple(k for k, v in parts.items() if v is not None)

    def to_dict(self) -> dict:
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else list(v) if isinstance(v, tuple) else v
        return out
