"""The tiny hybrid teaching model: each layer kind leaks in its own way, and its boundary signal stops it."""
import numpy as np
import pytest
import torch

import packing_core as pc
from packing_core.models.hybrid import KINDS, HybridConfig, hybrid_model, layer_leaks, seq_idx_from_cu
from packing_core.models.registry import model_spec
from packing_core.verify import verify_runner
from packing_core.verify.equivalence import model_runner


@pytest.fixture(scope="module")
def leaks():
    return layer_leaks(hybrid_model(), lengths=(8, 12))


def test_the_convolution_bleeds_into_exactly_the_first_kernel_minus_one_tokens(leaks):
    conv = leaks.without_signal["convolution"]
    kernel = HybridConfig().kernel
    assert (conv[: kernel - 1] > 1e-3).all()           # each of the first 3 tokens reads the previous document
    assert (conv[kernel - 1:] == 0).all()              # from the 4th on, the taps stay inside the document
    assert leaks.first_clean("convolution") == kernel - 1


def test_the_recurrence_and_unmasked_attention_reach_every_token(leaks):
    for kind in ("recurrence", "attention"):
        assert (leaks.without_signal[kind] > 1e-3).all(), kind
        assert leaks.first_clean(kind) is None


def test_with_its_signal_every_layer_kind_matches_the_document_alone_exactly(leaks):
    for kind in KINDS:
        assert (leaks.with_signal[kind] == 0).all(), kind


def test_the_recurrent_leak_fades_but_a_longer_previous_document_is_still_read():
    """The state decays: the leak shrinks along the document, yet the last token still differs."""
    d = layer_leaks(hybrid_model(), lengths=(20, 30)).without_signal["recurrence"]
    assert d[-1] > 0 and d[-1] < d[0]


def test_a_kind_that_ignores_its_signal_is_the_only_one_that_leaks_end_to_end():
    """Alone vs packed on the whole model: honouring every signal is equivalent; dropping one is not."""
    docs = [[5, 9, 2, 7, 1, 3], [8, 4, 6, 2, 9]]
    for honour, equivalent in ((KINDS, True), (("attention", "recurrence"), False), (("attention", "convolution"), False)):
        model = hybrid_model(honour=honour)
        report = verify_runner(model_runner(model), docs, mask="on")
        assert report.equivalent == equivalent, honour


def test_the_registered_teaching_model_runs_through_verify_model():
    report = pc.verify_model("tiny-hybrid", mask="on")
    assert report.equivalent
    assert not pc.verify_model("tiny-hybrid", mask="off").equivalent


def test_seq_idx_marks_each_token_with_its_document():
    assert seq_idx_from_cu(torch.tensor([0, 2, 2, 5]), 5).tolist() == [0, 0, 2, 2, 2]   # an empty document skipped


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ValueError, match="honour names layer kinds"):
        HybridConfig(honour=("attention", "mlp"))
    with pytest.raises(ValueError, match="at least two documents"):
        layer_leaks(hybrid_model(), lengths=(5,))


def test_the_model_is_seeded_and_leaves_the_global_random_stream_alone():
    torch.manual_seed(7)
    before = torch.rand(1)
    torch.manual_seed(7)
    a, b = hybrid_model(seed=1), hybrid_model(seed=1)
    assert torch.rand(1) == before
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(next(hybrid_model(seed=2).parameters()), next(a.parameters()))
    assert np.isfinite(layer_leaks(a).to_dict()["without_signal"]["recurrence"]).all()


def test_the_leakage_lab_can_pass_the_loaded_teaching_model_itself():
    """The page loads a registered model once and hands verify_model the module, as it does for the tiny ones."""
    model, _ = model_spec("tiny-hybrid").load()
    assert pc.verify_model(model, mask="on").equivalent
    assert pc.verify_model(model, mask="on", backend="causal_only").equivalent is False
