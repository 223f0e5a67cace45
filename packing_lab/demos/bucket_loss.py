"""Bucketing's visible symptom: the training loss swings with the bucket each batch comes from.

The tiny model trains twice on the same documents (the training demo's topic documents, BOS then 3
to 9 tokens), from the same weights, for the same steps: once in random batches, once in length
buckets, each batch drawn from one bucket and the batches dealt in a shuffled order, as a
bucketing sampler (``group_by_length``, a bucket sampler) deals them. The loss is a mean over
each batch's tokens. A document's first token after BOS cannot be predicted (its topic is
unknown: about ln 48 nats), the later ones follow a Markov chain, so a batch of short documents
logs a higher loss than a batch of long ones. Nothing is wrong with either run; the bucketed curve
just oscillates with the bucket, and a learning-rate or early-stopping rule that reads it sees
noise that random batches do not have.

>>> demo = bucket_loss_demo(steps=40, seed=0)
>>> demo.bucketed.swing > 2 * demo.shuffled.swing, demo.length_correlation < -0.5
(True, True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from packing_core._validate import whole_number
from packing_core.models.tiny import TinyConfig, TinyTransformer
from packing_lab.demos.train import LEARNING_RATE, VOCAB_SIZE, sample_documents, successor_table

DOCS_PER_BATCH = 32
BUCKETS = 4


@dataclass(frozen=True)
class BucketRun:
    """One training run: the loss each step logged, and the mean document length of each step's batch."""

    order: str                       # "random batches" | "length buckets"
    losses: tuple[float, ...]
    mean_length: tuple[float, ...]   # tokens per document in each step's batch, BOS included
    trained: tuple[int, ...] = ()    # trained targets in each step's batch: the loss's denominator

    @property
    def swing(self) -> float:
        """Mean |loss change| from one step to the next over the second half (after the fall)."""
        x = np.asarray(self.losses[len(self.losses) // 2:])
        return float(np.abs(np.diff(x)).mean()) if len(x) > 1 else 0.0

    def to_dict(self) -> dict:
        return {"order": self.order, "losses": list(self.losses), "mean_length": list(self.mean_length),
                "trained": list(self.trained), "swing": self.swing}


@dataclass(frozen=True)
class BucketDemo:
    shuffled: BucketRun
    bucketed: BucketRun

    @property
    def length_correlation(self) -> float:
        """Correlation of the bucketed run's step loss with its batch's mean document length (second half)."""
        h = len(self.bucketed.losses) // 2
        return float(np.corrcoef(self.bucketed.losses[h:], self.bucketed.mean_length[h:])[0, 1])

    @property
    def short_token_weight(self) -> float:
        """How much more one trained token of the shortest-document batches (the bucketed run's lowest quarter of
        mean lengths) weighs in its step than a token of a random batch: a mean over the batch's tokens gives each
        token 1 / (the batch's trained tokens)."""
        length, trained = np.asarray(self.bucketed.mean_length), np.asarray(self.bucketed.trained, dtype=float)
        short = trained[length <= np.quantile(length, 0.25)]
        return float(np.mean(self.shuffled.trained) / short.mean()) if len(short) else 1.0

    @property
    def sentence(self) -> str:
        b, s = self.bucketed, self.shuffled
        return (f"Over the second half of training the bucketed loss moves by {b.swing:.2f} nats from one step to the "
                f"next, random batches by {s.swing:.2f}: {b.swing / s.swing:.1f}x the swing. It follows the bucket: "
                f"its correlation with the batch's mean document length is {self.length_correlation:.2f} (short "
                f"documents have more unpredictable first tokens). The curve is not only noisier: with a mean over "
                f"each batch's tokens, a token of the shortest-document batches weighs {self.short_token_weight:.1f}x "
                "what it weighs in a random batch, so the objective leans towards short documents (normalise by the "
                "tokens of the whole step, not of each batch, to avoid it).")

    def to_dict(self) -> dict:
        return {"shuffled": self.shuffled.to_dict(), "bucketed": self.bucketed.to_dict(),
                "length_correlation": self.length_correlation, "short_token_weight": self.short_token_weight,
                "sentence": self.sentence}


def _batches(lengths: np.ndarray, steps: int, rng: np.random.Generator, buckets: int | None) -> list[np.ndarray]:
    """Document indices of each step: random batches, or batches from one length bucket in a shuffled order."""
    n = steps * DOCS_PER_BATCH
    if buckets is None:
        return list(rng.permutation(n).reshape(steps, DOCS_PER_BATCH))
    order = np.argsort(lengths[:n] + rng.random(n), kind="stable")      # by length, ties broken at random
    per_bucket = np.array_split(order, buckets)
    batches = [b[i:i + DOCS_PER_BATCH] for b in (rng.permutation(x) for x in per_bucket)
               for i in range(0, len(b) - DOCS_PER_BATCH + 1, DOCS_PER_BATCH)]
    return [batches[i] for i in rng.permutation(len(batches))][:steps]


def _train(docs, batches: list[np.ndarray], seed: int, order: str) -> BucketRun:
    starts = np.concatenate([[0], np.cumsum(docs.lengths)])
    model = TinyTransformer(TinyConfig(vocab_size=VOCAB_SIZE, d_model=64, n_heads=4, n_layers=2,
                                       positions="rope", seed=seed)).train()
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    losses, mean_length, trained = [], [], []
    for idx in batches:
        lengths = docs.lengths[idx]
        ids = np.concatenate([docs.tokens[starts[i]:starts[i + 1]] for i in idx])   # 32 documents: a short loop
        pos = np.concatenate([np.arange(n) for n in lengths])
        targets = np.append(ids[1:], -100)
        ends = np.cumsum(lengths) - 1
        targets[ends] = -100                        # a document's last token predicts nothing
        cu = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        logits = model(torch.from_numpy(ids), torch.from_numpy(pos), cu, int(lengths.max()), backend="dense")
        loss = F.cross_entropy(logits, torch.from_numpy(targets), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        mean_length.append(float(lengths.mean()))
        trained.append(int((targets != -100).sum()))
    return BucketRun(order, tuple(losses), tuple(mean_length), tuple(trained))


def bucket_loss_demo(steps: int = 80, *, buckets: int = BUCKETS, seed: int = 0) -> BucketDemo:
    """Train the tiny model on the same documents in random batches and in length buckets (see the module doc).

    Batches this small run fastest on one thread: the run takes one for itself and gives the count back.
    """
    steps = whole_number(steps, "steps", minimum=8, maximum=2000, hint="120 shows the swing in a few seconds")
    buckets = whole_number(buckets, "buckets", minimum=2, maximum=16)
    docs = sample_documents(steps * DOCS_PER_BATCH + buckets * DOCS_PER_BATCH, successor_table(seed),
                            np.random.default_rng([seed, 3]), same_topic=0.0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        shuffled = _train(docs, _batches(docs.lengths, steps, np.random.default_rng([seed, 4]), None), seed,
                          "random batches")
        bucketed = _train(docs, _batches(docs.lengths, steps, np.random.default_rng([seed, 5]), buckets), seed,
                          "length buckets")
    finally:
        torch.set_num_threads(threads)
    return BucketDemo(shuffled, bucketed)
