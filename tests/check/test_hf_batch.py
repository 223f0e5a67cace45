"""check_hf_batch and `python -m packing_core check`: batches as trainers emit them."""
import io
import json
import pickle

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file
from transformers import DataCollatorWithFlattening

import packing_core as pc
from packing_core.check import load_batch_bytes
from packing_core.cli import main
from packing_lab.viz import hf_batch_figure
from tests._support import save_tiny_llama

DOCS = [[11, 12, 13, 14, 15], [21, 22, 23, 24], [31, 32, 33]]


def flattened(**kw):
    """A real transformers collator's padding-free batch of DOCS."""
    collate = DataCollatorWithFlattening(return_tensors="np", **kw)
    return collate([{"input_ids": d} for d in DOCS])


def names(batch):
    check = pc.check_hf_batch(batch)
    return [f.name for f in check.errors + check.warnings]


def test_transformers_flattening_collator_output_is_sound():
    check = pc.check_hf_batch(flattened(return_flash_attn_kwargs=True))
    assert check.sound and check.format == "padding-free"
    assert check.documents.per_row() == (((0, 5), (5, 4), (9, 3)),)


def test_labels_shifted_over_the_whole_row_cross_the_boundary():
    batch = flattened()
    batch["labels"] = batch["input_ids"].copy()      # no -100 at document starts
    check = pc.check_hf_batch(batch)
    assert check.names == ("label_crosses_boundary",)
    assert {(r, s) for n, r, s in check.marks} == {(0, 5), (0, 9)}


def test_labels_shifted_by_the_collator_are_not_the_tokens():
    batch = flattened()
    batch["labels"] = np.r_[batch["labels"][0, 1:], -100][None]
    assert "label_is_not_the_token" in pc.check_hf_batch(batch, labels="unshifted").names
    auto = pc.check_hf_batch(batch)                  # auto reads them as targets, and says so
    assert "labels read as shifted (auto)" in auto.documents.labels_reason and auto.sound
    crossing = dict(batch, labels=np.r_[batch["input_ids"][0, 1:], -100][None])    # targets over the whole row
    assert "label_crosses_boundary" in pc.check_hf_batch(crossing, labels="shifted").names


def test_positions_that_run_on_with_cu_seq_lens_disagree_and_do_not_restart():
    batch = flattened(return_flash_attn_kwargs=True)
    batch["position_ids"] = np.arange(12)[None]
    # sdpa reads the positions (no reset: one sequence), flash reads cu_seq_lens (the documents)
    assert names(batch) == ["documents_share_attention", "positions_do_not_restart", "boundaries_disagree"]
    flash = pc.check_hf_batch(batch, "flash_attention_2")
    assert flash.sound and [f.name for f in flash.warnings] == ["positions_do_not_restart", "boundaries_disagree"]


def test_a_document_starting_past_zero_does_not_restart():
    batch = flattened()
    batch["position_ids"][0, 5:9] = [7, 8, 9, 10]
    assert names(batch) == ["positions_do_not_restart"]


def test_pads_at_position_zero_multiply_documents():
    batch = flattened()
    batch = {k: np.pad(v, ((0, 0), (0, 4)), constant_values=-100 if k == "labels" else 0) for k, v in batch.items()}
    check = pc.check_hf_batch(batch)
    assert check.sound and [f.name for f in check.warnings] == ["pads_given_position_zero"]
    assert "packed detection sees 7 sequences" in check.warnings[0].detail


def test_pads_continuing_the_positions_are_sound_when_cu_seq_lens_end_before_them():
    batch = flattened(return_flash_attn_kwargs=True)
    batch = {k: np.pad(v, ((0, 0), (0, 4)), constant_values=-100 if k == "labels" else 0) if v.ndim == 2 else v
             for k, v in batch.items() if k.startswith(("input", "labels", "position", "cu_"))}
    assert names(batch) == ["pads_given_position_zero"]            # zeros: 4 one-token documents
    batch["position_ids"][0, 12:] = np.arange(4)                 # one dummy sequence (VeOmni's fix)
    assert names(batch) == []


def test_pads_in_the_loss_are_named():
    batch = {"input_ids": [[1, 2, 3, 0], [4, 5, 6, 7]], "labels": [[1, 2, 3, 0], [4, 5, 6, 7]],
             "attention_mask": [[1, 1, 1, 0], [1, 1, 1, 1]]}
    assert names(batch) == ["pad_in_loss"]
    batch["labels"][0][3] = -100
    assert names(batch) == [] and pc.check_hf_batch(batch).format == "padded"


def test_an_all_ones_mask_beside_packed_positions_hides_the_packing():
    batch = flattened()
    batch["attention_mask"] = np.ones_like(batch["input_ids"])
    check = pc.check_hf_batch(batch)
    assert [f.name for f in check.errors] == ["documents_share_attention"]
    assert "a 2D attention_mask is given" in check.errors[0].detail
    assert pc.check_hf_batch(batch, "flash_attention_2").sound     # flash drops an all-ones mask


def test_cu_seq_lens_q_and_k_must_agree_and_be_well_formed():
    batch = flattened(return_flash_attn_kwargs=True)
    batch["cu_seq_lens_k"] = np.array([0, 5, 12])
    assert "cu_seq_lens_q_differs_from_k" in names(batch)
    batch["cu_seq_lens_q"] = batch["cu_seq_lens_k"] = np.array([0, 9, 5, 12])
    assert "cu_seq_lens_malformed" in names(batch)


def test_a_packed_row_with_positions_only_is_read():
    check = pc.check_hf_batch({"input_ids": [[1, 2, 3, 4, 5]], "position_ids": [[0, 1, 2, 0, 1]]})
    assert check.sound and check.n_documents == 2


@pytest.mark.parametrize("batch, message", [
    ({"labels": [[1, 2]]}, "no input_ids"),
    ({"input_ids": [[1.5, 2.0]]}, "must hold integers"),
    ({"input_ids": [[1, 2], [3]]}, "ragged"),
    ({"input_ids": [[1, 2, 3, 0]], "position_ids": [[0, 1, 2]]}, "pad them to the same length"),
    ({"input_ids": [[1, 2]], "attention_mask": [[1, -1]]}, "1 for real tokens"),
    ({"input_ids": [[1, 2]], "attention_mask": [[1, 0.5]]}, "1 for real tokens"),
    ({"input_ids": np.zeros((1, 2, 2), dtype=np.int64)}, r"\[batch, tokens\]"),
])
def test_bad_batches_raise_one_clear_error(batch, message):
    with pytest.raises(ValueError, match=message):
        pc.check_hf_batch(batch)


# ---------------------------------------------------------------- files and the CLI
def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kind", ["safetensors", "npz", "json"])
def test_check_reads_every_file_format(tmp_path, kind):
    batch = flattened(return_flash_attn_kwargs=True)
    batch = {k: np.asarray(v, dtype=np.int64) for k, v in batch.items() if not k.startswith("max_")}
    path = tmp_path / f"batch.{kind}"
    if kind == "safetensors":
        save_file(batch, str(path))
    elif kind == "npz":
        np.savez(path, **batch)
    else:
        path.write_text(json.dumps({k: v.tolist() for k, v in batch.items()}))
    code, out, err = run_cli("check", str(path))
    assert (code, err) == (0, "") and "SOUND" in out
    batch["labels"] = batch["input_ids"]
    np.savez(tmp_path / "bad.npz", **batch)
    code, out, _ = run_cli("check", str(tmp_path / "bad.npz"), "--format", "json")
    assert code == 1 and json.loads(out)["checks"][0]["findings"][0]["name"] == "label_crosses_boundary"


@pytest.mark.parametrize("name", ["batch.pt", "batch.json"])
def test_pickles_are_refused_by_name_and_by_content(tmp_path, name):
    path = tmp_path / name
    if name.endswith(".pt"):
        torch.save({"input_ids": torch.ones(1, 3, dtype=torch.long)}, path)
    else:
        path.write_bytes(pickle.dumps({"input_ids": [[1, 2]]}))   # a pickle wearing a .json name
    code, out, err = run_cli("check", str(path))
    assert code == 2 and out == "" and err.startswith("error: ") and "pickle" in err and err.count("\n") == 1


def test_bad_batch_files_exit_2_with_one_line(tmp_path):
    (tmp_path / "short.json").write_text(json.dumps({"input_ids": [[1, 2, 3]], "labels": [[1, 2]]}))
    code, _, err = run_cli("check", str(tmp_path / "short.json"))
    assert code == 2 and "labels has shape (1, 2) but input_ids has (1, 3)" in err
    (tmp_path / "x.txt").write_text("hello")
    assert run_cli("check", str(tmp_path / "x.txt"))[0] == 2


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """A real transformers LLaMA saved as safetensors (random init, for speed)."""
    return save_tiny_llama(tmp_path_factory.mktemp("llama"), vocab_size=64, max_positions=64)


def test_check_with_a_model_finds_the_leak_of_an_all_ones_mask(tmp_path, llama_dir):
    batch = {k: np.asarray(v, dtype=np.int64) for k, v in flattened().items()}
    np.savez(tmp_path / "good.npz", **batch)
    code, out, _ = run_cli("check", str(tmp_path / "good.npz"), "--model", str(llama_dir))
    assert code == 0 and "NO LEAK" in out
    batch["attention_mask"] = np.ones_like(batch["input_ids"])
    np.savez(tmp_path / "masked.npz", **batch)
    code, out, _ = run_cli("check", str(tmp_path / "masked.npz"), "--model", str(llama_dir), "--format", "json")
    run = json.loads(out)["model_run"]
    assert code == 1 and run["leaks"] and run["documents"][0]["equivalent"] and not run["documents"][1]["equivalent"]


# ---------------------------------------------------------------- the Check your setup page
def upload(name, data):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../../app.py", default_timeout=120)
    at.switch_page("app_pages/check_your_setup.py").run()
    at.file_uploader(key="check_your_setup.batch_file").set_value((name, data, "application/octet-stream")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_uploaded_batch_is_drawn_with_each_violation_named():
    batch = flattened()
    batch["labels"] = batch["input_ids"].tolist()
    at = upload("batch.json", json.dumps({k: np.asarray(v).tolist() for k, v in batch.items()}).encode())
    assert any("label_crosses_boundary" in e.value for e in at.error) and not at.exception   # an error is red
    fig = hf_batch_figure(pc.check_hf_batch(batch))
    assert "label_crosses_boundary" in list(fig.data[0].y)


def test_an_uploaded_pickle_is_refused_in_one_line():
    at = upload("batch.pt", b"\x80\x04K\x01.")
    assert len(at.error) == 1 and "pickle" in at.error[0].value


def test_batch_bytes_and_files_read_the_same(tmp_path):
    batch = {k: np.asarray(v, dtype=np.int64) for k, v in flattened().items()}
    save_file(batch, str(tmp_path / "b.safetensors"))
    from_file = pc.load_batch_file(tmp_path / "b.safetensors")
    from_bytes = load_batch_bytes((tmp_path / "b.safetensors").read_bytes(), "b.safetensors")
    assert sorted(from_file) == sorted(from_bytes) and all((from_file[k] == from_bytes[k]).all() for k in from_file)
