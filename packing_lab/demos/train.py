"""A wrong mask never errors: train the tiny model twice, mask on and mask off.

Both runs start from the same weights and see the same batches in the same order; the
only difference is the ``cu_seqlens`` handed to attention (document pieces, or whole
rows: the mask bug). Nothing raises and both losses fall. Whether the buggy run *looks*
better depends on the data: it does only when neighbouring documents are informative.
The default data are made so that the leak pays off during training::

    vocabulary  0 pad, 1 BOS, then 8 topics of 6 tokens: topic t owns ids 2+6t .. 7+6t
    a topic     a Markov chain: each token has two successors (3/4 and 1/4)
    a document  [BOS 15 17 14 15]     BOS, then 3 to 9 tokens of one topic
    the stream  topics 2 2 2 5 5 5 5 0 0 ...   9 in 10 documents share the previous
                                               one's topic (data sorted by source)
    rows        concat-cut into rows of 64 tokens, 8 rows per step

After BOS, a document on its own cannot know its topic: the best guess spreads over all
48 tokens (loss ln 48 = 3.87). With the mask off it reads the previous document, which
is on the same topic 9 times in 10, so its training loss drops below the correct run's.
With ``same_topic=1/TOPICS`` (independent neighbours) the previous document tells nothing,
and the two training losses come out about equal.

Both models are then judged under the same two conditions:

- *alone*: each held-out document by itself, as at inference. This is the real harm:
  the mask-off model has learned to lean on a neighbour that is no longer there.
- *previous visible*: the held-out rows with one causal triangle per row, so each
  document can read the one before it. *Drift* is measured here, for both models: after
  a document of another topic, how often the first guess comes from that old topic.
  The mask-on model never learned to ignore a neighbour either, so it drifts too.

The model is :class:`packing_core.models.tiny.TinyTransformer` (2 layers, 64 wide, RoPE) from
its seeded random init: chosen so both runs take a few seconds on a CPU, not for quality.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from packing_core._validate import MASKS, InputError, whole_number
from packing_core.batch.packed import IGNORE_INDEX, PackedBatch
from packing_core.models.tiny import TinyConfig, TinyTransformer
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_core.packing.strategies import make_plan

PAD_ID, BOS_ID = 0, 1
TOPICS = 8               # the drift a blind guess would show: 1 in TOPICS
TOKENS_PER_TOPIC = 6
FIRST_TOPIC_ID = 2
VOCAB_SIZE = FIRST_TOPIC_ID + TOPICS * TOKENS_PER_TOPIC
DOC_TOKENS = (3, 9)      # tokens after BOS, inclusive: short documents make starts frequent
CONTEXT = 64
ROWS_PER_STEP = 8
SAME_TOPIC = 0.9         # share of documents whose predecessor has their topic
STAY = 0.75              # probability of a token's first successor
LEARNING_RATE = 3e-3
FINAL_WINDOW = 20        # the final train loss is the mean of the last steps (one batch is noisy)
EVAL_DOCUMENTS = 2000


@dataclass(frozen=True)
class TopicDocuments:
    """Documents laid end to end: ``tokens`` holds them concatenated, BOS first in each.

    ``lengths [4, 3] -> tokens [1 15 17 14  1 44 41]`` with ``topics [2, 7]``.
    """

    tokens: np.ndarray    # int64 [sum(lengths)]
    lengths: np.ndarray   # int64 [n]: BOS included
    topics: np.ndarray    # int64 [n]


@dataclass(frozen=True)
class TrainResult:
    """One training run and its held-out numbers (losses are mean cross-entropy in nats)."""

    mask: str                    # "on" | "off"
    seed: int
    steps: int
    same_topic: float            # share of neighbours on the same topic in the data
    losses: tuple[float, ...]    # train loss per step, as the training log shows it
    train_loss: float            # mean of the last FINAL_WINDOW steps
    packed_loss: float           # held-out rows packed as in training, with this run's mask
    alone_loss: float            # held-out documents, each one alone (how inference runs): the real harm
    visible_loss: float          # held-out rows, every document able to read the previous one (mask off)
    drift_share: float           # previous document visible, after one of another topic: first guess from it
    drift_cases: int             # how many such document starts the share is over
    seconds: float               # wall time of training plus evaluation

    def to_dict(self) -> dict:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["losses"] = list(self.losses)
        return d

    @property
    def start_loss(self) -> float:
        """Mean of the first FINAL_WINDOW steps: what the final loss fell from."""
        return float(np.mean(self.losses[:FINAL_WINDOW]))


class TrainPair(NamedTuple):
    """The demo's two runs, mask on and mask off, and what their numbers say (``on, off = pair`` still works).

    >>> run = lambda mask, train, alone, drift: TrainResult(mask, 0, 150, SAME_TOPIC, (3.0,), train, 1.2, alone,
    ...                                                       1.1, drift, 40, 5.0)
    >>> TrainPair(run("on", 1.25, 1.20, 0.5), run("off", 1.05, 1.30, 0.7)).story()[:80]
    'The broken run looks better in training: 1.050 against 1.250, because each docum'
    """

    on: TrainResult
    off: TrainResult

    @property
    def related(self) -> bool:
        """Neighbours on the same topic more often than chance (data sorted by source)."""
        return self.on.same_topic > 1 / TOPICS

    def story(self) -> str:
        """The numbers in words: training loss, the loss alone (the real harm), and drift, only as far as they go."""
        on, off = self.on, self.off
        looks = (f"looks better in training: {off.train_loss:.3f} against {on.train_loss:.3f}, because each "
                 "document reads the one before it and borrows its topic" if off.train_loss - on.train_loss < -0.02
                 else f"looks no better in training: {off.train_loss:.3f} against {on.train_loss:.3f}, because a "
                      "neighbour on an unrelated topic has nothing to lend")
        worse = "worse" if off.alone_loss > on.alone_loss else "no worse"
        if off.drift_share > on.drift_share:   # it reads its neighbour: the lean that inference never feeds
            harm = "That is the harm that counts: it learned to lean on a neighbour that inference never gives it. "
        else:
            harm = (f"It trained with a neighbour always in view, yet it learned to ignore that neighbour (drift "
                    f"{100 * off.drift_share:.0f}%, about a blind guess's {100 / TOPICS:.1f}%); alone it is "
                    f"{worse} all the same. ")
        tail = ("Switch the neighbours to independent: the better-looking training loss goes away, because it "
                "exists only when neighbours are informative." if self.related else
                "With independent neighbours the broken run gains nothing in training: a neighbour on an unrelated "
                "topic has nothing to lend.")
        return (f"The broken run {looks}. Run every held-out document alone, as at inference, and it is {worse}: "
                f"{off.alone_loss:.3f} against {on.alone_loss:.3f}. {harm}With the previous document visible, after "
                f"a change of topic the first guess comes from the old topic {100 * on.drift_share:.0f}% of the "
                f"time for the mask-on model and {100 * off.drift_share:.0f}% for the mask-off one (a blind guess: "
                f"1 in {TOPICS}). The mask-on model never learned to ignore a neighbour: it never had one. So the "
                f"drift figure alone does not convict the bug; the alone loss does. {tail}")

    def to_dict(self) -> dict:
        return {"on": self.on.to_dict(), "off": self.off.to_dict(), "story": self.story()}


def topic_of(token_ids) -> np.ndarray:
    """Topic of each token id (pad and BOS have none: -1).

    >>> topic_of([0, 1, 2, 7, 8, 49]).tolist()
    [-1, -1, 0, 0, 1, 7]
    """
    ids = np.asarray(token_ids, dtype=np.int64)
    return np.where(ids >= FIRST_TOPIC_ID, (ids - FIRST_TOPIC_ID) // TOKENS_PER_TOPIC, -1)


def successor_table(seed: int) -> np.ndarray:
    """int64 ``[TOPICS, TOKENS_PER_TOPIC, 2]``: the two successors of each token in each topic."""
    rng = np.random.default_rng([seed, 0])
    keys = rng.random((TOPICS, TOKENS_PER_TOPIC, TOKENS_PER_TOPIC))
    return np.argsort(keys, axis=-1)[..., :2]   # two distinct successors per token


def sample_documents(n: int, successors: np.ndarray, rng: np.random.Generator,
                     same_topic: float = SAME_TOPIC) -> TopicDocuments:
    """``n`` documents in stream order; each keeps the previous topic with ``same_topic``."""
    jump = np.where(rng.random(n) < same_topic, 0, rng.integers(1, TOPICS, n))
    jump[0] = 0
    topics = (rng.integers(TOPICS) + np.cumsum(jump)) % TOPICS
    body = rng.integers(DOC_TOKENS[0], DOC_TOKENS[1] + 1, n)
    local = np.empty((n, DOC_TOKENS[1]), dtype=np.int64)
    local[:, 0] = rng.integers(TOKENS_PER_TOPIC, size=n)
    second = (rng.random((n, DOC_TOKENS[1])) >= STAY).astype(np.int64)
    for t in range(1, DOC_TOKENS[1]):            # a loop over positions (at most 9), not documents
        local[:, t] = successors[topics, local[:, t - 1], second[:, t]]
    ids = FIRST_TOPIC_ID + topics[:, None] * TOKENS_PER_TOPIC + local
    grid = np.concatenate([np.full((n, 1), BOS_ID), ids], axis=1)
    keep = np.arange(DOC_TOKENS[1] + 1)[None, :] <= body[:, None]
    return TopicDocuments(grid[keep], body + 1, topics)


def pack(docs: TopicDocuments, context: int = CONTEXT) -> PackedBatch:
    """Concatenate and cut into rows of ``context`` (position ids reset per piece)."""
    plan = make_plan(docs.lengths, context, "concat-cut")
    return PackedBatch.from_plan(plan, docs.tokens, np.zeros(len(docs.lengths), np.int64), pad_id=PAD_ID)


@dataclass(frozen=True)
class _Rows:
    """Full rows of a PackedBatch laid end to end, and where their pieces start."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    targets: torch.Tensor
    document_ids: torch.Tensor
    piece_starts: np.ndarray   # flat offsets of every piece start
    width: int

    @staticmethod
    def of(batch: PackedBatch) -> "_Rows":
        full = (batch.piece_ids >= 0).all(dim=1)   # a partial last row would carry pads
        seg = batch.piece_ids[full].numpy()
        width = seg.shape[1]
        starts = np.ones_like(seg, dtype=bool)
        starts[:, 1:] = seg[:, 1:] != seg[:, :-1]
        return _Rows(batch.input_ids[full].reshape(-1), batch.position_ids[full].reshape(-1),
                     batch.targets[full].reshape(-1), batch.document_ids[full].reshape(-1),
                     np.flatnonzero(starts.reshape(-1)), width)

    @property
    def n_rows(self) -> int:
        return len(self.input_ids) // self.width

    def cu_seqlens(self, mask: str, first_row: int = 0, rows: int | None = None) -> torch.Tensor:
        """Boundaries for rows ``first_row..`` : pieces (mask on) or whole rows (mask off)."""
        rows = self.n_rows - first_row if rows is None else rows
        a, b = first_row * self.width, (first_row + rows) * self.width
        if mask == "on":
            inner = self.piece_starts[(self.piece_starts >= a) & (self.piece_starts < b)] - a
        else:
            inner = np.arange(0, b - a, self.width)
        return torch.from_numpy(np.append(inner, b - a).astype(np.int32))


def _forward(model, ids, pos, cu) -> torch.Tensor:
    return model(ids, pos, cu, int((cu[1:] - cu[:-1]).max()), backend="segments")


def _check(mask: str, steps: int, same_topic: float) -> None:
    if mask not in MASKS:
        raise InputError(f"mask must be 'on' or 'off', got {mask!r}: 'on' gives each document its "
                         "own causal block, 'off' one causal triangle per row (the bug)")
    whole_number(steps, "steps", minimum=2 * FINAL_WINDOW, maximum=5000,
                 hint=f"an integer from {2 * FINAL_WINDOW} to 5000; 150 shows the effect in a few seconds")
    if not 0.0 <= same_topic <= 1.0:
        raise InputError(f"same_topic is a share of documents, got {same_topic!r}: pick a value in [0, 1]")


def train_demo(mask: str = "on", *, steps: int = 150, seed: int = 0,
               same_topic: float = SAME_TOPIC, progress=None) -> TrainResult:
    """Train the tiny model on packed topic documents with the mask ``on`` or ``off``.

    With the default seed the mask-off run ends training with the lower loss and is worse
    when each document runs alone (``tests/test_train.py`` pins both; two runs take ~10 s).

    The same ``seed`` gives the same data, the same initial weights and the same losses;
    ``mask`` changes nothing but the attention boundaries. ``progress(done, steps)``, if
    given, hears every tenth step (a page draws its progress bar from it).
    """
    _check(mask, steps, same_topic)
    t0 = time.perf_counter()
    successors = successor_table(seed)
    rng = np.random.default_rng([seed, 1])
    mean_tokens = (DOC_TOKENS[0] + DOC_TOKENS[1]) / 2 + 1
    n_docs = math.ceil(steps * ROWS_PER_STEP * CONTEXT / mean_tokens * 1.1) + 16
    rows = _Rows.of(pack(sample_documents(n_docs, successors, rng, same_topic)))
    if rows.n_rows < steps * ROWS_PER_STEP:   # the margin above makes this a bug, not bad luck
        raise InputError(f"sampled {rows.n_rows} rows for {steps} steps of {ROWS_PER_STEP}: raise the margin")

    model = TinyTransformer(TinyConfig(vocab_size=VOCAB_SIZE, d_model=64, n_heads=4, n_layers=2,
                                       positions="rope", seed=seed)).train()
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    span = ROWS_PER_STEP * CONTEXT
    losses = []
    for step in range(steps):
        a = step * span
        cu = rows.cu_seqlens(mask, step * ROWS_PER_STEP, ROWS_PER_STEP)
        logits = _forward(model, rows.input_ids[a:a + span], rows.position_ids[a:a + span], cu)
        loss = F.cross_entropy(logits, rows.targets[a:a + span], ignore_index=IGNORE_INDEX)
        if not torch.isfinite(loss):
            raise InputError(f"the training loss became {loss.item()} at step {step}: "
                             f"lower the learning rate (now {LEARNING_RATE})")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # a spike must not end the demo
        opt.step()
        losses.append(loss.item())
        if progress is not None and ((step + 1) % 10 == 0 or step + 1 == steps):
            progress(step + 1, steps)

    held_out = sample_documents(EVAL_DOCUMENTS, successors, np.random.default_rng([seed, 2]), same_topic)
    ev = evaluate(model.eval(), held_out, mask)
    return TrainResult(mask=mask, seed=seed, steps=steps, same_topic=float(same_topic),
                       losses=tuple(losses), train_loss=float(np.mean(losses[-FINAL_WINDOW:])),
                       packed_loss=ev.packed_loss, alone_loss=ev.alone_loss, visible_loss=ev.visible_loss,
                       drift_share=ev.drift_share, drift_cases=ev.drift_cases,
                       seconds=time.perf_counter() - t0)


@dataclass(frozen=True)
class Evaluation:
    """One trained model on held-out documents, under three conditions (mean cross-entropy, nats)."""

    packed_loss: float    # rows as in training, with the run's own mask
    alone_loss: float     # each document alone
    visible_loss: float   # rows with the previous document visible (mask off), for every model
    drift_share: float    # with the previous document visible: first guess from its topic after a switch
    drift_cases: int


@torch.no_grad()
def evaluate(model, docs: TopicDocuments, mask: str) -> Evaluation:
    """``model`` on held-out ``docs``: packed with its own mask, alone, and with the previous document visible.

    *packed*: the documents concat-cut into rows as in training, under ``mask``.
    *alone*: every document its own segment (cu_seqlens = document boundaries); the
    segments backend runs each one independently, exactly as if it were alone.
    *visible*: the same rows with one causal triangle per row, whatever the run trained with.
    *drift*: in the visible rows, document starts whose predecessor has another topic; the
    share where the top-1 guess after BOS is a token of that previous topic (chance: 1 in 8).
    """
    rows = _Rows.of(pack(docs))
    logits = _forward(model, rows.input_ids, rows.position_ids, rows.cu_seqlens(mask))
    packed = F.cross_entropy(logits, rows.targets, ignore_index=IGNORE_INDEX).item()
    if mask != "off":
        logits = _forward(model, rows.input_ids, rows.position_ids, rows.cu_seqlens("off"))
    visible = F.cross_entropy(logits, rows.targets, ignore_index=IGNORE_INDEX).item()

    # Alone: targets inside each document only (the next document's BOS is not a target).
    ids = torch.from_numpy(docs.tokens)
    cu = cu_seqlens_from_lengths(docs.lengths)
    pos = torch.from_numpy(np.arange(len(ids)) - np.repeat(cu[:-1], docs.lengths))
    targets = torch.cat([ids[1:], ids.new_full((1,), IGNORE_INDEX)])
    targets[cu[1:] - 1] = IGNORE_INDEX
    alone_logits = _forward(model, ids, pos, torch.from_numpy(cu.astype(np.int32)))
    alone = F.cross_entropy(alone_logits, targets, ignore_index=IGNORE_INDEX).item()

    # Drift: a BOS that is not the first token of its row has the previous document before it.
    flat = np.arange(len(rows.input_ids))
    starts = (rows.input_ids.numpy() == BOS_ID) & (flat % rows.width > 0)
    doc = rows.document_ids.numpy()[starts]
    previous = docs.topics[doc - 1]
    switched = previous != docs.topics[doc]
    guess = topic_of(logits[torch.from_numpy(starts)].argmax(dim=-1).numpy())
    cases = int(switched.sum())
    drift = float((guess[switched] == previous[switched]).mean()) if cases else float("nan")
    return Evaluation(packed, alone, visible, drift, cases)
