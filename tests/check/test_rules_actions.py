"""Every finding says what to do in one short line: the rule's action, or the first sentence of its trainer advice.

A page shows that line first, in the finding's colour, and folds the detail and the whole fix under it.
"""
import ast
import inspect

import numpy as np
import pytest
from transformers import DataCollatorWithFlattening

import packing_core as pc
from packing_core.check import trainers
from packing_core.check.rules import RULES, Finding, first_sentence

MOST_WORDS = 20


def _advice_texts() -> list[str]:
    """Every advice text the trainers module can give: the string literals it returns or names."""
    tree = ast.parse(inspect.getsource(trainers))
    texts = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    return [t for t in texts if len(t.split()) > 6 and not t.startswith(("Which trainer", "``", "The fix of", "The trainer"))]


@pytest.mark.parametrize("name", list(RULES))
def test_every_rule_says_its_fix_in_one_line_of_at_most_twenty_words(name):
    action = RULES[name].action
    assert action and "\n" not in action and len(action.split()) <= MOST_WORDS, action
    assert action.endswith("."), action


def test_every_trainer_advice_opens_with_an_order_of_at_most_twenty_words():
    texts = _advice_texts()
    assert len(texts) >= 15, texts                                   # the module's advice, found
    long = [first_sentence(t) for t in texts if len(first_sentence(t).split()) > MOST_WORDS]
    assert long == []


def test_a_finding_with_advice_leads_with_the_advices_first_sentence():
    f = Finding("pad_in_loss", "row 0", advice="Do this now. Because of that.")
    assert f.action == "Do this now." and f.fix == "Do this now. Because of that."
    assert Finding("pad_in_loss", "row 0").action == RULES["pad_in_loss"].action


def test_a_flattened_batch_with_an_all_ones_mask_is_named_padding_free_and_told_to_drop_the_mask():
    collate = DataCollatorWithFlattening(return_tensors="np", return_flash_attn_kwargs=True)
    batch = collate([{"input_ids": d} for d in ([11, 12, 13, 14], [21, 22, 23], [31, 32])])
    batch["attention_mask"] = np.ones_like(batch["input_ids"])
    check = pc.check_hf_batch(batch)
    assert check.trainer == "flattening"
    leak = next(f for f in check.errors if f.name == "documents_share_attention")
    assert leak.action.startswith("Drop the all-ones attention_mask") and len(leak.action.split()) <= MOST_WORDS


def test_a_padded_batch_keeps_its_name():
    batch = {"input_ids": np.array([[5, 6, 0], [7, 8, 9]]), "attention_mask": np.array([[1, 1, 0], [1, 1, 1]])}
    assert pc.check_hf_batch(batch).trainer == "padded"
