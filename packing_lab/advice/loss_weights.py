"""How much each document weighs in one optimizer step: the averaging rule, accumulation and ranks.

A layout lists micro-batches, each a list of rows, each row the counted tokens (loss positions) of
its documents. Micro-batch ``k`` runs on rank ``k // accumulation`` as accumulation step
``k % accumulation``; the trainer sums the gradients of a rank's micro-batches, and data
parallelism averages the ranks. A document's weight is its share of the step's gradient: the sum
over its tokens of d(step loss)/d(token loss). Under each rule a token weighs:

- ``token-global``: sum of token losses / the step's counted tokens N: 1 / N;
- ``token-micro``: mean over the micro-batch, / G accumulation steps, R ranks: 1 / (N_micro G R);
- ``row``: mean per row, then over the micro-batch's rows: 1 / (rows_micro len_row G R);
- ``document-micro``: mean per document, then over the micro-batch's documents: 1 / (docs_micro len_doc G R);
- ``document-global``: mean per document, over the step's D documents: 1 / (D len_doc).

``token-global`` is transformers' Trainer and TRL: the loss divides a sum by ``num_items_in_batch``,
counted over the accumulation window and, with ``average_tokens_across_devices`` (default True), over
the ranks (``Trainer._get_num_items_in_batch``); ``Trainer.training_step`` then skips its own division
by the accumulation steps (``loss_is_scaled_for_ga``). A model that takes no loss kwargs falls back
to ``token-micro`` (huggingface/transformers #37766). With ``divided_twice`` the loss is normalised
by the window's count *and* divided again by G: every weight shrinks G-fold (unslothai/unsloth-zoo
#1023). Only the two ``-global`` rules give every document the same weight however the same data
is packed; ``document-micro`` splits preference pairs unevenly (modelscope/ms-swift #10144):

>>> split = step_loss_weights(parse_layout("1 || 1 1 1"), accumulation=2, rule="document-micro")
>>> split.weights.round(4).tolist(), split.unpacked.round(4).tolist()
([0.5, 0.1667, 0.1667, 0.1667], [0.25, 0.25, 0.25, 0.25])
>>> round(pair_gradient(split.weights), 4), round(pair_gradient(split.unpacked), 4)
(0.025, -0.0125)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError, choice, whole_number

AVERAGING_RULES = {
    "token-global": "per token over the whole step (transformers' Trainer and TRL: a sum / num_items_in_batch)",
    "token-micro": "per token over each micro-batch, divided by the accumulation steps (a model without loss kwargs)",
    "row": "per row, then over the micro-batch's rows (the lab's loss-per-row bug)",
    "document-micro": "per document, then over the micro-batch's documents (packed DPO in ms-swift before #10144)",
    "document-global": "per document, over the whole step's documents (ms-swift's fix in #10144)",
}
MAX_DOCUMENTS = 1000   # a calculator for a lesson: a table of at most this many documents

# The toy of modelscope/ms-swift #10144: sigmoid DPO, beta 0.1, the policy equal to the reference, so each
# pair's loss is log 2 and its gradient is -beta * sigmoid(0) * (the pair's log-ratio margin's derivative).
DPO_BETA = 0.1
DPO_DIRECTIONS = (-2.0, 1.0, 1.0, 1.0)   # d(margin)/d(parameter) of the four pairs


@dataclass(frozen=True)
class LossPreset:
    """A layout and settings that reproduce a known case, with where it was reported."""

    title: str
    layout: str
    accumulation: int
    ranks: int
    rule: str
    divided_twice: bool
    reported: str


PRESETS = {
    "loss-per-row": LossPreset("the lab's loss-per-row bug: a short document alone in its row", "4 | 60 60", 1, 1,
                               "row", False, "huggingface/transformers #34191 (the count over accumulation)"),
    "divided-twice": LossPreset("gradient accumulation divided twice", "40 || 60 || 20 || 80", 4, 1, "token-global",
                                True, "unslothai/unsloth-zoo #1023 (merged)"),
    "split-pairs": LossPreset("preference pairs split [1, 3] over two accumulation steps", "1 || 1 1 1", 2, 1,
                              "document-micro", False, "modelscope/ms-swift #10144 (merged)"),
}


def parse_layout(text: str) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """``"4 | 60 60 || 30"`` -> micro-batches of rows of counted tokens per document.

    >>> parse_layout("4 | 60 60 || 30")
    (((4,), (60, 60)), ((30,),))
    """
    out = []
    for micro in str(text).split("||"):
        rows = []
        for row in micro.split("|"):
            parts = row.replace(",", " ").split()
            if not parts:
                continue
            try:
                rows.append(tuple(whole_number(int(p), "counted tokens", hint="e.g. 4 | 60 60 || 30") for p in parts))
            except ValueError:
                raise InputError(f"counted tokens must be whole numbers >= 1, got {row.strip()!r}: write rows as "
                                 "'4 | 60 60' and micro-batches apart with '||'") from None
        if rows:
            out.append(tuple(rows))
    if not out:
        raise InputError("no documents given: write counted tokens per document, rows apart with '|', "
                         "micro-batches apart with '||', e.g. 4 | 60 60 || 30")
    return tuple(out)


@dataclass(frozen=True, eq=False)
class LossWeights:
    """Each document's weight in one optimizer step under one rule, and under the same rule unpacked."""

    layout: tuple[tuple[tuple[int, ...], ...], ...]
    accumulation: int
    ranks: int
    rule: str
    divided_twice: bool
    micro_batch: np.ndarray   # int [documents]
    row: np.ndarray           # int [documents]: the row inside its micro-batch
    tokens: np.ndarray        # int [documents]: counted tokens
    weights: np.ndarray       # float [documents]: share of the step's gradient
    unpacked: np.ndarray      # float [documents]: the same rule, each document alone in its row, one step, one rank

    @property
    def rank(self) -> np.ndarray:
        return self.micro_batch // self.accumulation

    @property
    def step(self) -> np.ndarray:
        return self.micro_batch % self.accumulation

    @property
    def total(self) -> float:
        """The weights' sum: 1 unless the loss was divided twice."""
        return float(self.weights.sum())

    @property
    def depends_on_packing(self) -> bool:
        """Does any document weigh differently than it would unpacked?"""
        return not np.allclose(self.weights, self.unpacked, rtol=1e-9, atol=0)

    @property
    def sentence(self) -> str:
        n = len(self.weights)
        if self.depends_on_packing:
            moved = int((~np.isclose(self.weights, self.unpacked, rtol=1e-9, atol=0)).sum())
            said = (f"Under this rule the packing sets the weights: {moved} of {n} documents weigh differently than "
                    "the same data unpacked in one step.")
        else:
            said = f"Under this rule every one of the {n} documents weighs the same packed or unpacked."
        if not np.isclose(self.total, 1.0):
            said += (f" The weights sum to {self.total:.3g}, not 1: the step's gradient is {self.total:.3g} of what "
                     "the rule intends.")
        return said

    def to_dict(self) -> dict:
        return {"layout": [[list(r) for r in m] for m in self.layout], "accumulation": self.accumulation,
                "ranks": self.ranks, "rule": self.rule, "divided_twice": self.divided_twice,
                "tokens": self.tokens.tolist(), "micro_batch": self.micro_batch.tolist(), "row": self.row.tolist(),
                "weights": self.weights.tolist(), "unpacked": self.unpacked.tolist(),
                "depends_on_packing": self.depends_on_packing, "total": self.total, "sentence": self.sentence}


def _weights(layout, accumulation: int, ranks: int, rule: str, divided_twice: bool) -> np.ndarray:
    micro = [np.asarray([n for row in m for n in row], dtype=np.float64) for m in layout]   # a lesson: a few rows
    n_all = float(sum(m.sum() for m in micro))
    docs_all = sum(len(m) for m in micro)
    out = []
    for m, rows in zip(micro, layout):
        ga = accumulation * ranks
        if rule == "token-global":
            w = m / n_all
        elif rule == "token-micro":
            w = m / (m.sum() * ga)
        elif rule == "row":
            w = np.concatenate([np.asarray(r, dtype=np.float64) / sum(r) for r in rows]) / (len(rows) * ga)
        elif rule == "document-micro":
            w = np.full(len(m), 1.0 / (len(m) * ga))
        else:
            w = np.full(len(m), 1.0 / docs_all)
        out.append(w)
    w = np.concatenate(out)
    return w / accumulation if divided_twice else w


def step_loss_weights(layout, accumulation: int = 1, ranks: int = 1, rule: str = "token-global",
                 divided_twice: bool = False) -> LossWeights:
    """Each document's share of one optimizer step's gradient (see the module doc); ``layout`` as
    :func:`parse_layout` returns it, with exactly ``accumulation x ranks`` micro-batches.

    >>> w = step_loss_weights(parse_layout("4 | 60 60"), rule="row")
    >>> w.weights.round(3).tolist(), w.unpacked.round(3).tolist(), w.depends_on_packing
    ([0.5, 0.25, 0.25], [0.333, 0.333, 0.333], True)
    """
    choice("rule", rule, tuple(AVERAGING_RULES))
    accumulation = whole_number(accumulation, "accumulation", maximum=64, hint="gradient-accumulation steps, e.g. 4")
    ranks = whole_number(ranks, "ranks", maximum=64, hint="data-parallel ranks, e.g. 8")
    layout = tuple(tuple(tuple(int(n) for n in row) for row in m) for m in layout)
    if len(layout) != accumulation * ranks:
        raise InputError(f"the layout has {len(layout)} micro-batch(es) but {accumulation} accumulation step(s) x "
                         f"{ranks} rank(s) run {accumulation * ranks}: give one micro-batch per step and rank, "
                         "apart with '||'")
    docs = [(k, r, n) for k, m in enumerate(layout) for r, row in enumerate(m) for n in row]
    if not docs or len(docs) > MAX_DOCUMENTS or any(n < 1 for _, _, n in docs):
        raise InputError(f"give 1 to {MAX_DOCUMENTS:,} documents of at least 1 counted token each, got {len(docs):,}")
    k, r, n = (np.asarray(x, dtype=np.int64) for x in zip(*docs))
    unpacked_layout = (tuple((int(t),) for t in n),)     # each document alone in its row, one micro-batch
    return LossWeights(layout, accumulation, ranks, rule, divided_twice, k, r, n,
                       _weights(layout, accumulation, ranks, rule, divided_twice),
                       _weights(unpacked_layout, 1, 1, rule, False))


def dpo_pair_gradients(directions=DPO_DIRECTIONS, beta: float = DPO_BETA) -> np.ndarray:
    """Each pair's gradient in the toy of ms-swift #10144: ``-beta * sigmoid(0) * direction``.

    >>> dpo_pair_gradients().tolist()
    [0.1, -0.05, -0.05, -0.05]
    """
    return -beta * 0.5 * np.asarray(directions, dtype=np.float64)


def pair_gradient(weights, gradients=None) -> float:
    """The parameter's gradient: the pairs' gradients weighted as the loss weighs them."""
    g = dpo_pair_gradients() if gradients is None else np.asarray(gradients, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != g.shape:
        raise InputError(f"one gradient per pair: {len(w)} weights, {len(g)} gradients")
    return float(w @ g)
