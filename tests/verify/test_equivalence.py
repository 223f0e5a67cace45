"""The packed-vs-alone verifier: a correct setup agrees, every known mistake shows."""
import io
import json

import numpy as np
import pytest
import torch
from transformers import BloomConfig, BloomForCausalLM

from packing_core import VerifyReport, verify_model
from packing_core.cli import main
from packing_core.data import byte_tokenizer
from packing_core.models import load_pretrained, pretrained_status
from packing_core.models.pretrained import load_local_model
from packing_core.models.tiny import tiny_model
from packing_core.verify import drift_pretrained, verify_runner
from packing_core.verify.equivalence import default_documents, default_tolerance, model_runner
from packing_core.verify.texts import tokenise_texts
from tests._support import save_tiny_llama

TINY = ["tiny-rope", "tiny-abs"]


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("backend", ["segments", "dense", "padded"])
def test_mask_on_with_reset_positions_matches_every_document(name, backend):
    report = verify_model(name, mask="on", positions="reset", backend=backend)
    assert report.equivalent, report.format_table()
    assert len(report.documents) == 3


@pytest.mark.parametrize("name", TINY)
def test_mask_off_changes_later_documents_but_not_the_first(name):
    report = verify_model(name, mask="off", positions="reset")
    first, *later = report.documents
    assert first.equivalent
    assert not any(d.equivalent for d in later)
    assert not report.equivalent


@pytest.mark.parametrize("name", TINY)
def test_a_leak_is_far_above_the_tolerance(name):
    report = verify_model(name, mask="off", positions="reset")
    assert report.documents[1].max_abs_diff > 100 * report.tolerance


def test_continuous_positions_change_absolute_embeddings():
    report = verify_model("tiny-abs", mask="on", positions="continuous")
    assert report.documents[0].equivalent          # it starts at 0 either way
    assert not report.documents[1].equivalent
    assert not report.documents[2].equivalent


def test_continuous_positions_leave_rope_with_a_correct_mask_unchanged():
    report = verify_model("tiny-rope", mask="on", positions="continuous")
    assert report.equivalent, report.format_table()


def test_bfloat16_uses_a_looser_tolerance_and_still_passes_with_the_mask_on():
    fp32 = verify_model("tiny-rope", mask="on")
    bf16 = verify_model(tiny_model("tiny-rope", dtype=torch.bfloat16), mask="on")
    assert bf16.dtype == "bfloat16"
    assert bf16.tolerance > 10 * fp32.tolerance
    assert bf16.equivalent, bf16.format_table()


def test_bfloat16_still_catches_the_leak():
    bf16 = verify_model(tiny_model("tiny-rope", dtype=torch.bfloat16), mask="off")
    assert not bf16.equivalent


def test_token_diffs_cover_the_row_and_locate_the_leak():
    report = verify_model("tiny-rope", mask="off")
    cu = report.cu_seqlens
    assert report.token_diffs.shape == (cu[-1],)
    assert report.token_diffs[:cu[1]].max() <= report.tolerance
    # The first token of document 1 already reads document 0.
    assert report.token_diffs[cu[1]] > report.tolerance


def recording_runner(record):
    """A tiny-rope runner that appends ``record(ids, pos, cu)`` to ``seen`` on each call."""
    seen = []
    model = tiny_model("tiny-rope")

    def runner(ids, pos, cu, max_len):
        seen.append(record(ids, pos, cu))
        return model(ids, pos, cu, max_len)
    return runner, seen


def test_mask_off_calls_the_runner_with_row_boundaries():
    runner, seen = recording_runner(lambda ids, pos, cu: cu.tolist())
    verify_runner(runner, default_documents((3, 2)), mask="off")
    assert seen == [[0, 3], [0, 2], [0, 5]]


def test_the_runner_gets_reset_or_continuous_positions_for_the_packed_row():
    runner, seen = recording_runner(lambda ids, pos, cu: pos.tolist())
    docs = default_documents((3, 2))
    verify_runner(runner, docs, positions="reset")
    verify_runner(runner, docs, positions="continuous")
    assert seen[2] == [0, 1, 2, 0, 1]
    assert seen[5] == [0, 1, 2, 3, 4]
    assert seen[1] == [0, 1]                          # alone runs always start at 0


def test_an_explicit_tolerance_overrides_the_default():
    model = tiny_model("tiny-rope")
    report = verify_runner(model_runner(model, "dense"), default_documents(), tolerance=0.0,
                    backend_name="dense")
    assert report.tolerance == 0.0
    assert "caller" in report.tolerance_reason
    assert report.equivalent == all(d.max_abs_diff == 0 for d in report.documents)


def test_tolerance_reason_explains_why_bits_differ():
    tol, reason = default_tolerance(torch.float32, "segments", 3.0)
    assert tol == pytest.approx(3e-4)
    assert "bitwise" in reason.lower() and "reduction order" in reason


def test_flash_kernels_get_a_wider_tolerance():
    assert (default_tolerance(torch.bfloat16, "varlen", 1.0)[0]
            > default_tolerance(torch.bfloat16, "segments", 1.0)[0])


def test_report_serialises_to_json_and_a_table():
    report = verify_model("tiny-abs", mask="off")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["equivalent"] is False
    assert [d["length"] for d in data["documents"]] == [40, 24, 56]
    assert len(data["token_diffs"]) == 120
    table = report.format_table()
    assert table.count("DIFFERENT") == 2
    isolation, causality = table.split("\n\ncausality")        # two checks, printed apart
    assert isolation.splitlines()[-1].startswith("NOT EQUIVALENT")
    assert causality.splitlines()[-1].startswith("CAUSAL.") and data["causality"]["future_visible"] is False


def test_default_documents_are_seeded_and_of_different_lengths():
    assert default_documents() == default_documents()
    assert len({len(d) for d in default_documents()}) == 3
    assert default_documents(seed=1) != default_documents()


def test_bad_arguments_are_rejected_with_the_choices():
    runner = model_runner(tiny_model("tiny-rope"))
    with pytest.raises(ValueError, match="'on'"):
        verify_runner(runner, default_documents(), mask="maybe")
    with pytest.raises(ValueError, match="non-empty"):
        verify_runner(runner, [[1, 2], []])
    with pytest.raises(ValueError, match="smollm2"):
        verify_model("gpt2")


def test_smollm2_not_installed_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PACKING_LAB_MODELS", str(tmp_path / "no-models"))
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("packing_core.models.pretrained.GGUF_PACKAGE", "no_such_model_package")
    with pytest.raises(ValueError, match="scripts/install.sh"):
        verify_model("smollm2", mask="on", positions="reset")


def test_smollm2_refuses_a_seed_it_would_ignore():
    with pytest.raises(ValueError, match="seed draws the tiny models"):
        verify_model("smollm2", seed=3)


def test_one_report_type_for_every_model_with_top1_changes_from_its_own_logits():
    calls = []
    model = tiny_model("tiny-rope")
    runner = model_runner(model)

    def counting(*args):
        calls.append(1)
        return runner(*args)

    report = verify_runner(counting, default_documents((6, 5)), mask="off", decode=lambda ids: str(ids[0]))
    assert isinstance(report, VerifyReport) and len(calls) == 3      # two alone + one packed, no re-run
    assert report.changes is not None and all(c.document == 1 for c in report.changes)
    assert verify_model("tiny-rope").changes is None                  # nothing to decode with


def test_token_diffs_are_floats_not_tensors():
    report = verify_model("tiny-rope")
    assert isinstance(report.token_diffs, np.ndarray)
    assert report.token_diffs.dtype == np.float64


@pytest.mark.cuda
@pytest.mark.parametrize("backend", ["varlen", "segments"])
def test_cuda_bfloat16_passes_with_the_mask_and_catches_the_leak(backend):
    net = tiny_model("tiny-rope", dtype=torch.bfloat16, device="cuda")
    assert verify_model(net, mask="on", backend=backend).equivalent
    assert not verify_model(net, mask="off", backend=backend).equivalent


# ---------------------------------------------------------------- your texts, your model


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def fake_tokenizer(texts):
    return {"input_ids": [list(t.encode()) for t in texts]}


@pytest.mark.parametrize("texts, message", [
    (["only one"], "give 2 to 4 texts, got 1"),
    (["a", "b", "c", "d", "e"], "give 2 to 4 texts, got 5"),
    (["fine", "  "], "text 1 is empty"),
    (["fine", "x" * 600], "text 1 is 600 tokens long; the limit is 512"),
])
def test_text_limits_are_enforced_with_the_limit_named(texts, message):
    with pytest.raises(ValueError, match=message):
        tokenise_texts(fake_tokenizer, texts)


def test_verify_refuses_a_non_utf8_texts_file_in_one_line(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_bytes("café\nthé\n".encode("latin-1"))
    code, out, err = run_cli("verify", "--model", "smollm2", "--texts", str(path))
    assert code == 2 and out == "" and "is not UTF-8 text" in err and err.count("\n") == 1


def test_verify_refuses_text_for_a_tiny_model():
    code, _, err = run_cli("verify", "--model", "tiny-rope", "--text", "a", "--text", "b")
    assert code == 2 and "need a tokenizer" in err


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """A real transformers LlamaForCausalLM saved with safetensors (random init, for speed)."""
    return save_tiny_llama(tmp_path_factory.mktemp("llama"), vocab_size=300, max_positions=256)


@pytest.mark.parametrize("mask, code", [("on", 0), ("off", 1)])
def test_verify_a_local_model_folder_through_our_backends(llama_dir, mask, code):
    got, out, err = run_cli("verify", "--model", str(llama_dir), "--mask", mask)
    assert (got, err) == (code, "") and ("NOT EQUIVALENT" in out) == (mask == "off")


def test_a_folder_without_safetensors_is_refused(llama_dir, tmp_path):
    (tmp_path / "config.json").write_text((llama_dir / "config.json").read_text())
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    code, _, err = run_cli("verify", "--model", str(tmp_path))
    assert code == 2 and "no *.safetensors" in err and "pytorch_model.bin" in err


def test_a_folder_that_is_no_model_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run_cli("verify", "--model", str(tmp_path))
    assert code == 2 and "no config.json" in err


def test_a_model_that_takes_no_position_ids_is_refused(tmp_path):
    BloomForCausalLM(BloomConfig(vocab_size=64, hidden_size=32, n_layer=1, n_head=4)).save_pretrained(
        tmp_path, safe_serialization=True)
    with pytest.raises(ValueError, match="takes no position_ids"):
        load_local_model(tmp_path)


# ---------------------------------------------------------------- drift in words (SmolLM2)
@pytest.fixture(scope="module")
def smollm2():
    from tests._support import skip_or_fail

    available, message = pretrained_status()
    if not available:
        skip_or_fail(message)
    return load_pretrained()


def test_with_the_mask_the_continuations_alone_and_packed_are_identical(smollm2):
    c = drift_pretrained(mask="on", pretrained=smollm2)
    assert c.same and c.steps == 20 and len(c.alone_ids) == 20 and c.alone_text == c.packed_text


def test_without_the_mask_the_second_text_drifts_in_words(smollm2):
    c = drift_pretrained(mask="off", pretrained=smollm2)
    assert not c.same and c.alone_text != c.packed_text
    assert "Eiffel" not in c.packed_text and c.first_difference is not None


def test_our_tokenizer_wrapper_and_a_plain_callable_both_tokenise():
    assert tokenise_texts(byte_tokenizer, ["ab", "c"]) == [[97, 98], [99]]


def test_verify_smollm2_on_a_texts_file_finds_the_leak(smollm2, tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("The cat sat on the warm mat all afternoon.\n\nInterest rates rose again this spring.\n",
                    encoding="utf-8")
    code, out, err = run_cli("verify", "--model", "smollm2", "--mask", "off", "--texts", str(path))
    assert (code, err) == (1, "") and "Interest rates rose" in out and "NOT EQUIVALENT" in out
