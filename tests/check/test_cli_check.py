"""`python -m packing_core check FILE`: per implementation, severities, evidence flags, batch forms."""
import io
import json

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

import packing_core as pc
from packing_core.cli import main

PACKED_ROWS = {"input_ids": np.array([[11, 12, 13, 21, 22, 23], [31, 32, 41, 42, 43, 44]]),
               "position_ids": np.array([[0, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]])}


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def saved(tmp_path, batch, name="batch.safetensors"):
    path = tmp_path / name
    save_file({k: np.ascontiguousarray(v) for k, v in batch.items()}, str(path))
    return str(path)


def test_all_prints_a_verdict_per_implementation_and_fails_if_any_leaks(tmp_path):
    path = saved(tmp_path, PACKED_ROWS)
    assert run_cli("check", path)[0] == 0                       # sdpa reads the resets
    code, out, _ = run_cli("check", path, "--attn-implementation", "all")
    assert code == 1 and "sdpa: SOUND" in out and "flash_attention_2: 1 ERROR(S): documents_share_attention" in out
    code, out, _ = run_cli("check", path, "--attn-implementation", "flash_attention_2")
    assert code == 1 and "_is_packed_sequence needs one flattened row" in out


def test_a_sound_batch_with_a_warning_exits_0_unless_strict(tmp_path):
    batch = {"input_ids": np.array([[5, 6, 7, 0, 0, 0]]), "position_ids": np.array([[0, 1, 2, 0, 0, 0]])}
    path = saved(tmp_path, batch)
    code, out, _ = run_cli("check", path)
    assert code == 0 and "WARNING pads_given_position_zero" in out
    assert run_cli("check", path, "--strict")[0] == 1


def test_eos_ids_find_documents_a_wrapped_row_hides(tmp_path):
    path = saved(tmp_path, {"input_ids": np.array([[5, 6, 2, 7, 8, 2]]), "attention_mask": np.ones((1, 6), np.int64)})
    code, out, _ = run_cli("check", path)
    assert code == 0 and "no_document_boundaries" in out
    code, out, _ = run_cli("check", path, "--eos-id", "2")
    assert code == 1 and "documents_share_attention" in out
    assert run_cli("check", path, "--eos-id", "2", "--allow-cross-document")[0] == 0


def test_labels_auto_says_what_it_decided(tmp_path):
    batch = {"input_ids": np.array([[5, 6, 7, 8]]), "labels": np.array([[6, 7, 8, -100]])}
    path = saved(tmp_path, batch)
    code, out, _ = run_cli("check", path)
    assert code == 0 and "labels read as shifted (auto)" in out
    code, out, _ = run_cli("check", path, "--labels", "unshifted")
    assert code == 1 and "label_is_not_the_token" in out


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_4d_masks_are_read_as_given(tmp_path, kind):
    allowed = np.tril(np.ones((6, 6), bool))
    allowed[3:, :3] = False
    mask = allowed if kind == "bool" else np.where(allowed, 0.0, np.finfo(np.float32).min).astype(np.float32)
    batch = {"input_ids": np.array([[1, 2, 3, 4, 5, 6]]), "position_ids": np.array([[0, 1, 2, 0, 1, 2]]),
             "attention_mask": mask[None, None]}
    code, out, _ = run_cli("check", saved(tmp_path, batch))
    assert code == 0 and "4D mask batch" in out
    batch["attention_mask"] = (np.tril(np.ones((6, 6), bool)) if kind == "bool" else
                               np.zeros((6, 6), np.float32))[None, None]       # a plain causal 4D mask
    code, out, _ = run_cli("check", saved(tmp_path, batch, "leaky.safetensors"))
    assert code == 1 and "a 4D attention_mask is used as given" in out


def test_torchtune_keys_and_non_tensor_entries_are_read(tmp_path):
    path = tmp_path / "tt.json"
    path.write_text(json.dumps({"tokens": [[1, 2, 3, 4]], "labels": [[1, 2, 3, 4]], "input_pos": [[0, 1, 0, 1]],
                                "note": "from my loop", "use_cache": False}))
    code, out, _ = run_cli("check", str(path))
    assert code == 1 and "label_crosses_boundary" in out and "entries_ignored" in out and "note" in out


def test_tensors_on_the_meta_device_get_a_message_that_says_so():
    with pytest.raises(ValueError, match="meta device"):
        pc.check_hf_batch({"input_ids": torch.ones(1, 4, dtype=torch.long, device="meta")})


def test_a_file_that_is_not_a_batch_gets_one_line(tmp_path):
    (tmp_path / "b.json").write_text(json.dumps({"input_ids": [["a", "b"]]}))
    code, out, err = run_cli("check", str(tmp_path / "b.json"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "input_ids" in err


def test_a_safetensors_file_whose_header_size_starts_with_0x80_is_not_taken_for_a_pickle(tmp_path):
    path = saved(tmp_path, {"input_ids": np.array([[5, 6, 7, 8]]), "labels": np.array([[6, 7, 8, -100]])})
    assert open(path, "rb").read(1) == b"\x80"          # a 128-byte header: pickle's protocol byte
    assert sorted(pc.load_batch_file(path)) == ["input_ids", "labels"]
