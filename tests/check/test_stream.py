"""A stream of batches: is packing really on, how full are the rows, the worst batch; bounded in files and memory."""
import io
import json
import tracemalloc

import numpy as np
import pytest
from safetensors.numpy import save_file
from transformers import DataCollatorWithFlattening
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from packing_core.check import check_stream, save_batch_file, summarize_checks
from packing_core.check import stream as stream_module
from packing_core.check.batch import check_hf_batch
from packing_core.check.stream import stream_files
from packing_core.cli import main

EOS = 2


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def padded_batches(n: int, rng) -> list[dict]:
    """TRL's collator without packing or padding-free: one example a row, padded to the longest."""
    out = []
    for _ in range(n):
        rows = [{"input_ids": [int(x) for x in rng.integers(3, 60, int(k))] + [EOS]} for k in rng.integers(2, 20, 4)]
        out.append(DataCollatorForLanguageModeling(pad_token_id=0)(rows))
    return out


def flattened_batches(n: int, rng) -> list[dict]:
    """transformers' DataCollatorWithFlattening: the documents of a batch in one row."""
    collate = DataCollatorWithFlattening(return_tensors="np", return_flash_attn_kwargs=True)
    return [collate([{"input_ids": list(rng.integers(3, 60, int(k)))} for k in rng.integers(2, 20, 4)])
            for _ in range(n)]


def write(folder, batches):
    folder.mkdir(exist_ok=True)
    for i, b in enumerate(batches):
        save_batch_file(b, folder / f"batch_{i:05d}.safetensors")
    return folder


def test_padded_batches_say_packing_is_off_and_how_empty_the_rows_are(tmp_path):
    rng = np.random.default_rng(0)
    batches = padded_batches(6, rng)
    summary = check_stream(write(tmp_path / "padded", batches))
    real = sum(int(np.asarray(b["attention_mask"]).sum()) for b in batches)
    slots = sum(np.asarray(b["input_ids"]).size for b in batches)
    assert not summary.packing_on and summary.line.startswith("packing is off")
    assert summary.fill == pytest.approx(real / slots) and summary.documents_per_row == 1.0


def test_flattened_batches_say_packing_is_on(tmp_path):
    summary = check_stream(write(tmp_path / "flat", flattened_batches(5, np.random.default_rng(1))))
    assert summary.packing_on and summary.with_boundaries == 5 and summary.documents_per_row == 4.0
    assert summary.fill == 1.0 and summary.line.startswith("packing is on: 5 of 5")


def test_the_worst_batch_is_the_one_with_errors(tmp_path):
    batches = flattened_batches(4, np.random.default_rng(2))
    batches[2]["labels"] = batches[2]["input_ids"].copy()            # labels across every document edge
    summary = check_stream(write(tmp_path / "some_bad", batches))
    assert summary.worst.name == "batch_00002.safetensors" and "label_crosses_boundary" in summary.worst.errors


def test_the_cli_reads_several_files_or_a_folder(tmp_path):
    folder = write(tmp_path / "padded", padded_batches(3, np.random.default_rng(3)))
    files = sorted(str(p) for p in folder.iterdir())
    code, out, err = run_cli("check", *files)
    assert (code, err) == (0, "") and out.startswith("packing is off")
    code, out, _ = run_cli("check", str(folder), "--format", "json")
    assert code == 0 and json.loads(out)["batches"] == 3 and not json.loads(out)["packing_on"]


def test_without_eos_ids_a_full_stream_may_hide_its_documents(tmp_path):
    rows = np.arange(32).reshape(4, 8) % 50 + 3
    save_file({"input_ids": rows, "attention_mask": np.ones_like(rows)}, str(tmp_path / "a.safetensors"))
    save_file({"input_ids": rows, "attention_mask": np.ones_like(rows)}, str(tmp_path / "b.safetensors"))
    summary = check_stream(tmp_path)
    assert "give the tokenizer" in summary.line
    assert "give the tokenizer" not in check_stream(tmp_path, eos_ids=(EOS,)).line


def test_past_the_limit_the_stream_is_refused_before_any_file_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(stream_module, "MAX_STREAM_BATCHES", 5)
    for i in range(6):
        (tmp_path / f"{i}.json").write_text("not json at all")       # reading any would fail differently
    with pytest.raises(ValueError, match="more than 5 batch files"):
        check_stream(tmp_path)
    assert len(stream_files([tmp_path / "0.json"] * 5)) == 5


def test_memory_does_not_grow_with_the_number_of_files(tmp_path):
    batch = flattened_batches(1, np.random.default_rng(4))[0]
    few, many = tmp_path / "few", tmp_path / "many"
    write(few, [batch] * 20)
    write(many, [batch] * 200)

    def peak(folder):
        tracemalloc.start()
        check_stream(folder)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    peak(few)                                           # imports and caches, once
    assert peak(many) < peak(few) + 512 * 1024          # 180 more batches cost their numbers, not their tensors


def test_summarize_checks_is_the_same_summary_for_checks_in_hand():
    batches = flattened_batches(3, np.random.default_rng(5))
    summary = summarize_checks([check_hf_batch(b) for b in batches])
    assert summary.packing_on and [b.name for b in summary.batches] == ["batch 1", "batch 2", "batch 3"]
    assert summary.to_dict()["per_batch"][0]["documents"] == 4
