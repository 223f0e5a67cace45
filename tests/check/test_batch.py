"""check/batch.py: one static half per batch, then one reading per attention implementation."""
import inspect
import io

import numpy as np
import pytest
from safetensors.numpy import save_file

import packing_core.check.batch as check_batch_module
import packing_core.check.static as static_module
from packing_core.attention import IMPLEMENTATIONS
from packing_core.check import check_all_implementations, check_hf_batch
from packing_core.cli import main

# transformers' padding-free layout: documents [3, 2, 4] in one flattened row, with cu_seq_lens
FLAT = {"input_ids": np.array([[11, 12, 13, 21, 22, 31, 32, 33, 34]]),
        "position_ids": np.array([[0, 1, 2, 0, 1, 0, 1, 2, 3]]),
        "labels": np.array([[-100, 12, 13, -100, 22, -100, 32, 33, 34]]),
        "cu_seq_lens_q": np.array([0, 3, 5, 9]), "cu_seq_lens_k": np.array([0, 3, 5, 9]),
        "max_length_q": 4, "max_length_k": 4}
# packed rows with resetting positions: sdpa reads the resets, flash does not (two rows)
ROWS = {"input_ids": np.array([[11, 12, 13, 21, 22, 23], [31, 32, 41, 42, 43, 44]]),
        "position_ids": np.array([[0, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]])}


@pytest.fixture
def counted(monkeypatch):
    """How often the intended documents and each implementation's reading are computed."""
    calls = {"intended_documents": 0, "effective_attention": []}
    documents, effective = static_module.intended_documents, check_batch_module.effective_attention

    def count_documents(*a, **kw):
        calls["intended_documents"] += 1
        return documents(*a, **kw)

    def count_effective(t, impl, **kw):
        calls["effective_attention"].append(impl)
        return effective(t, impl, **kw)

    monkeypatch.setattr(static_module, "intended_documents", count_documents)
    monkeypatch.setattr(check_batch_module, "effective_attention", count_effective)
    return calls


@pytest.mark.parametrize("batch", [FLAT, ROWS], ids=["padding-free", "packed rows"])
def test_all_implementations_compute_the_intended_documents_once_and_each_reading_once(counted, batch):
    checks = check_all_implementations(batch, eos_ids=(2,))
    assert counted["intended_documents"] == 1
    assert counted["effective_attention"] == list(IMPLEMENTATIONS)
    assert [c.attn_implementation for c in checks] == list(IMPLEMENTATIONS)


@pytest.mark.parametrize("batch", [FLAT, ROWS], ids=["padding-free", "packed rows"])
def test_all_implementations_equal_one_check_per_implementation(batch):
    together = check_all_implementations(batch, labels="unshifted", use_cache=True)
    for c in together:
        alone = check_hf_batch(batch, c.attn_implementation, labels="unshifted", use_cache=True, compare=False)
        assert c.findings == alone.findings and c.verdict == alone.verdict and c.to_dict() == alone.to_dict()


def test_with_compare_each_sound_verdict_names_the_implementations_that_leak():
    sdpa, flash = check_all_implementations(ROWS, ("sdpa", "flash_attention_2"), compare=True)
    assert sdpa.sound and "leaks_under_other_implementation" in sdpa.names
    assert "flash_attention_2" in next(f.detail for f in sdpa.notes if f.name == "leaks_under_other_implementation")
    assert not flash.sound and "leaks_under_other_implementation" not in flash.names
    assert sdpa.findings == check_hf_batch(ROWS, "sdpa").findings            # compare=True is check_hf_batch's


def test_check_all_implementations_takes_the_same_keywords_as_check_hf_batch():
    ours = inspect.signature(check_all_implementations).parameters
    theirs = inspect.signature(check_hf_batch).parameters
    assert list(ours)[:2] == ["batch", "implementations"]
    assert set(theirs) - {"attn_implementation"} == set(ours) - {"implementations"}
    assert ours["implementations"].default == IMPLEMENTATIONS


def test_an_unknown_implementation_is_refused_before_any_work(counted):
    with pytest.raises(ValueError, match="unknown attention implementation 'sdpa2'"):
        check_all_implementations(ROWS, ("sdpa", "sdpa2"))
    assert counted["intended_documents"] == 0


def test_the_cli_check_all_computes_the_intended_documents_once(counted, tmp_path):
    path = tmp_path / "rows.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in ROWS.items()}, str(path))
    out = io.StringIO()
    assert main(["check", str(path), "--attn-implementation", "all"], out, io.StringIO()) == 1
    assert counted["intended_documents"] == 1 and counted["effective_attention"] == list(IMPLEMENTATIONS)
    assert "sdpa: SOUND" in out.getvalue() and "flash_attention_2: 1 ERROR(S)" in out.getvalue()
