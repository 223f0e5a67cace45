"""Drift in words runs through the verdict's own path, so the words never contradict the verdict (review M1)."""
import numpy as np
import pytest
import torch

import packing_core as pc
from app_pages import _content
from packing_core.models.tiny import tiny_model
from packing_core.verify import attention_arguments, drift_path, drift_pretrained
from packing_core.verify.drift import continuations
from packing_core.verify.equivalence import default_documents, model_runner

TINY_SCENARIOS = [n for n, (_, cfg) in _content.SCENARIOS.items() if cfg["model"] in ("tiny-rope", "tiny-abs")]


def test_the_packed_row_reaches_the_runner_as_the_verdict_lays_it_out():
    """Mask on: cu_seqlens per document, positions reset; mask off: [0, T]. The runner sees exactly that."""
    seen = []

    def runner(ids, pos, cu, max_len):
        seen.append((len(ids), pos.tolist(), cu.tolist()))
        return torch.nn.functional.one_hot((ids + 1) % 16, 16).float()

    continuations(runner, [[1, 2, 3], [4, 5]], str, mask="on", steps=2)
    assert seen[-1] == (6, [0, 1, 2, 0, 1, 2], [0, 3, 6])       # packed, second step: 3 + (2 + 1 new)
    seen.clear()
    continuations(runner, [[1, 2, 3], [4, 5]], str, mask="off", positions="continuous", steps=1)
    assert seen[-1] == (5, [0, 1, 2, 3, 4], [0, 5])


def test_a_runner_that_reads_the_neighbour_drifts_and_one_that_does_not_stays():
    """A toy runner whose last logit depends on the whole row (mask off) or only the last document."""
    def runner(ids, pos, cu, max_len):
        start = int(cu[-2])                   # the continued document's first token in this row
        out = torch.zeros(len(ids), 32)
        out[-1, int(ids[start:].sum() + (ids[:start].sum() if start == 0 else 0)) % 32] = 1.0
        return out

    on = continuations(runner, [[7, 7], [1]], str, mask="on", steps=3)
    off = continuations(runner, [[7, 7], [1]], str, mask="off", steps=3)
    assert on.same and not off.same and off.first_difference == 0


@pytest.mark.parametrize("scenario", TINY_SCENARIOS)
def test_each_tiny_scenario_drifts_exactly_when_its_verdict_says_document_1_changed(scenario):
    cfg = _content.SCENARIOS[scenario][1]
    net = tiny_model(cfg["model"])
    report = pc.verify_model(net, mask=cfg["mask"], positions=cfg["positions"], backend=cfg["attention"])
    words = continuations(model_runner(net, cfg["attention"]), default_documents(vocab_size=net.cfg.vocab_size),
                          str, mask=cfg["mask"], positions=cfg["positions"], steps=6)
    assert words.same == report.documents[1].equivalent


def test_drift_path_names_the_backend_the_cache_and_the_positions():
    assert drift_path("sdpa", "on", "reset", True) == (
        "transformers' own sdpa attention, use_cache=True, position_ids reset, no attention_mask")
    assert "one causal triangle over the row" in drift_path("segments", "off", "reset", False)
    assert "one causal triangle over the row" in drift_path("causal_only", "on", "reset", False)


@pytest.mark.slow_model
def test_the_sdpa_cache_scenario_drifts_in_words_as_its_verdict_leaks(smollm2_pair):
    """The old drift always passed its own block mask, so it showed 'the same words' under a leaking path."""
    cfg = _content.SCENARIOS["sdpa with cache"][1]
    settings = dict(mask=cfg["mask"], positions=cfg["positions"], **attention_arguments(cfg["attention"]))
    leak = drift_pretrained(use_cache=True, steps=2, pretrained=smollm2_pair, **settings)
    assert not leak.same and "use_cache=True" in leak.path
    fixed = drift_pretrained(use_cache=False, steps=2, pretrained=smollm2_pair, **settings)
    assert fixed.same
    ours = drift_pretrained(mask="off", steps=2, pretrained=smollm2_pair)      # the lab's backend, mask off
    assert not ours.same and "4D masks with a KV cache" in ours.path
    assert np.array_equal(fixed.alone_ids, leak.alone_ids)   # alone, the cache changes nothing
