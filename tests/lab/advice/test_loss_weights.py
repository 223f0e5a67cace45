"""The loss-weight calculator against a real torch autograd gradient, computed the way a trainer computes it.

Every micro-batch's loss goes through transformers' own ``ForCausalLMLoss`` (token rules) or a plain
torch reduction (row and document rules), is divided by the accumulation steps where
``Trainer.training_step`` divides it, multiplied by the ranks where ``Trainer.compute_loss`` does,
and the ranks' gradients are averaged as data parallelism averages them. Each token's logits are
``theta_t x one_hot(target)`` at ``theta = 0``, so d(token loss)/d(theta_t) = -(1 - 1/V) for every
token and the gradient on ``theta_t`` reads off that token's weight exactly.
"""
import inspect

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from packing_core import InputError
from packing_lab.advice import AVERAGING_RULES, PRESETS, dpo_pair_gradients, pair_gradient, parse_layout, step_loss_weights

V = 8


def _reduce(per_token: torch.Tensor, rows: tuple, rule: str) -> torch.Tensor:
    """A micro-batch's loss from its per-token losses, by rows of documents, under a row or document rule."""
    docs, by_row, at = [], [], 0
    for row in rows:
        row_losses = []
        for n in row:
            docs.append(per_token[at:at + n].mean())
            row_losses.append(per_token[at:at + n])
            at += n
        by_row.append(torch.cat(row_losses).mean())
    return torch.stack(by_row).mean() if rule == "row" else torch.stack(docs).mean()


def autograd_weights(layout, accumulation: int, ranks: int, rule: str, divided_twice: bool = False) -> np.ndarray:
    from transformers.loss.loss_utils import ForCausalLMLoss

    n_all = sum(n for m in layout for row in m for n in row)
    d_all = sum(len(row) for m in layout for row in m)
    thetas, total = [], 0.0
    for rank in range(ranks):
        rank_loss = 0.0
        for step in range(accumulation):
            rows = layout[rank * accumulation + step]
            t = sum(n for row in rows for n in row)
            theta = torch.zeros(t, requires_grad=True)
            thetas.append(theta)
            targets = torch.arange(t) % V
            logits = (theta[:, None] * F.one_hot(targets, V).float())[None]
            if rule == "token-global":     # num_items_in_batch over the window and the ranks; x ranks in compute_loss
                loss = ForCausalLMLoss(logits, None, V, num_items_in_batch=torch.tensor(n_all),
                                       shift_labels=targets[None]) * ranks
                loss = loss / accumulation if divided_twice else loss
            elif rule == "token-micro":    # no loss kwargs: a mean per forward, / accumulation in training_step
                loss = ForCausalLMLoss(logits, None, V, shift_labels=targets[None]) / accumulation
            else:
                per_token = F.cross_entropy(logits[0], targets, reduction="none")
                if rule == "document-global":
                    loss = _reduce(per_token, rows, "document") * sum(len(r) for r in rows) / d_all * ranks
                else:
                    loss = _reduce(per_token, rows, rule) / accumulation
            rank_loss = rank_loss + loss
        total = total + rank_loss / ranks         # data parallelism averages the ranks' gradients
    total.backward()
    per_token = torch.cat([th.grad for th in thetas]) / -(1 - 1 / V)
    counts = [n for m in layout for row in m for n in row]
    return np.add.reduceat(per_token.numpy().astype(np.float64), np.cumsum([0, *counts[:-1]]))


LAYOUTS = [("4 | 60 60", 1, 1), ("3 9 | 5 || 2 2 2 | 7", 2, 1), ("5 | 1 || 8 || 2 2 | 3 || 6 4", 2, 2),
           ("10 20 || 30 || 40 | 5 5 || 1", 1, 4)]


@pytest.mark.parametrize("rule", list(AVERAGING_RULES))
@pytest.mark.parametrize("text,accumulation,ranks", LAYOUTS)
def test_every_rule_matches_autograd_through_the_trainers_own_reductions(text, accumulation, ranks, rule):
    layout = parse_layout(text)
    got = step_loss_weights(layout, accumulation, ranks, rule)
    assert got.weights == pytest.approx(autograd_weights(layout, accumulation, ranks, rule), abs=1e-7)
    assert got.total == pytest.approx(1.0)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_matches_autograd(name):
    p = PRESETS[name]
    layout = parse_layout(p.layout)
    got = step_loss_weights(layout, p.accumulation, p.ranks, p.rule, p.divided_twice)
    assert got.weights == pytest.approx(autograd_weights(layout, p.accumulation, p.ranks, p.rule, p.divided_twice),
                                        abs=1e-7)


def test_the_loss_per_row_preset_gives_the_lone_short_document_half_the_step():
    p = PRESETS["loss-per-row"]
    w = step_loss_weights(parse_layout(p.layout), p.accumulation, p.ranks, p.rule, p.divided_twice)
    assert w.weights.tolist() == pytest.approx([0.5, 0.25, 0.25])
    assert w.unpacked.tolist() == pytest.approx([1 / 3] * 3) and w.depends_on_packing
    token = step_loss_weights(parse_layout(p.layout), rule="token-global")
    assert token.weights.round(3).tolist() == [0.032, 0.484, 0.484] and not token.depends_on_packing
    assert 0.5 / token.weights[0] == pytest.approx(15.5)            # docs/measurements.md's 15.5x


def test_dividing_twice_shrinks_every_weight_by_the_accumulation_steps():
    p = PRESETS["divided-twice"]
    w = step_loss_weights(parse_layout(p.layout), p.accumulation, p.ranks, p.rule, p.divided_twice)
    right = step_loss_weights(parse_layout(p.layout), p.accumulation, p.ranks, p.rule, False)
    assert w.total == pytest.approx(1 / p.accumulation) and w.weights == pytest.approx(right.weights / p.accumulation)
    assert "sum to 0.25, not 1" in w.sentence
    # the trainer's own rule: it divides by the accumulation steps unless the loss was scaled for them
    from transformers import Trainer
    source = inspect.getsource(Trainer.training_step)
    assert "loss = loss / self.current_gradient_accumulation_steps" in source and "loss_is_scaled_for_ga" in source


def test_split_preference_pairs_flip_the_gradients_sign_as_in_ms_swift_10144():
    beta, directions = 0.1, torch.tensor([-2.0, 1.0, 1.0, 1.0])

    def grad(micro_batches, rule):
        theta = torch.zeros((), requires_grad=True)
        per_pair = -F.logsigmoid(beta * directions * theta)     # sigmoid DPO, reference margin 0
        total, at = 0.0, 0
        for n in micro_batches:
            pairs = per_pair[at:at + n]
            at += n
            total = total + (pairs.mean() / len(micro_batches) if rule == "document-micro" else pairs.sum() / 4)
        total.backward()
        return float(theta.grad)

    assert grad([4], "document-micro") == pytest.approx(-0.0125)
    assert grad([1, 3], "document-micro") == pytest.approx(0.025)          # the PR's "before"
    assert grad([2, 2], "document-micro") == pytest.approx(-0.0125)
    assert grad([1, 3], "document-global") == pytest.approx(-0.0125)       # the PR's "after"
    p = PRESETS["split-pairs"]
    w = step_loss_weights(parse_layout(p.layout), p.accumulation, p.ranks, p.rule)
    assert w.weights.tolist() == pytest.approx([1 / 2, 1 / 6, 1 / 6, 1 / 6])
    assert pair_gradient(w.weights) == pytest.approx(grad([1, 3], "document-micro"))
    assert pair_gradient(w.unpacked) == pytest.approx(grad([4], "document-micro"))
    fixed = step_loss_weights(parse_layout(p.layout), p.accumulation, p.ranks, "document-global")
    assert pair_gradient(fixed.weights) == pytest.approx(-0.0125)
    assert dpo_pair_gradients().tolist() == pytest.approx([0.1, -0.05, -0.05, -0.05])


def test_only_the_global_rules_ignore_how_the_same_data_is_packed():
    for text, g, r in LAYOUTS[1:]:
        layout = parse_layout(text)
        for rule in AVERAGING_RULES:
            moved = step_loss_weights(layout, g, r, rule).depends_on_packing
            assert moved == (rule not in ("token-global", "document-global")), (text, rule)


@pytest.mark.parametrize("text,accumulation,ranks,match", [
    ("4 | x", 1, 1, "whole numbers"), ("", 1, 1, "no documents"), ("4 || 5", 1, 1, "2 micro-batch"),
    ("4 | 0", 1, 1, ">= 1, got .0."), ("4", 0, 1, "accumulation"),
])
def test_bad_layouts_are_refused_with_one_clear_line(text, accumulation, ranks, match):
    with pytest.raises(InputError, match=match):
        step_loss_weights(parse_layout(text), accumulation, ranks)
