"""`check FILE --model FOLDER` / `--model-type NAME`: every layer of the model judged, the run reconciled.

The models are transformers' own classes, tiny and random-init for speed (``verify.families_build``:
the family's config with small sizes), saved with ``save_pretrained`` into a temporary folder as a
user would; the batches come from TRL's and transformers' own collators.
"""
import io
import json
import warnings

import numpy as np
import pytest
from safetensors.numpy import save_file

from packing_core.cli import main

DOCS = [[11, 12, 13, 14, 15, 16, 17], [21, 22, 23, 24, 25, 26, 27, 28, 29], [31, 32, 33, 34, 35]]


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def saved_batch(folder, name, batch):
    path = folder / f"{name}.safetensors"
    save_file({k: np.ascontiguousarray(v.numpy() if hasattr(v, "numpy") else np.array(v)) for k, v in batch.items()},
              str(path))
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The two batches and five model folders, saved once."""
    from transformers import DataCollatorWithFlattening
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    from packing_core.verify.families_build import build_tiny

    root = tmp_path_factory.mktemp("mixers")
    out = {"trl": saved_batch(root, "trl", DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(
               [{"input_ids": d} for d in DOCS])),
           "flat": saved_batch(root, "flat", DataCollatorWithFlattening(return_tensors="pt")(
               [{"input_ids": d} for d in DOCS]))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in ("qwen3_next", "lfm2", "llama", "roberta", "opt"):
            model = build_tiny(model_type)
            if model_type == "roberta":
                model.config.is_decoder = True        # RobertaForCausalLM as a causal LM (else it reads the future)
            model.save_pretrained(root / model_type)
            out[model_type] = str(root / model_type)
    return out


@pytest.mark.parametrize("model_type", ["qwen3_next", "lfm2"])
def test_trls_batch_on_a_hybrid_is_refused_here_by_layer_kind_and_the_run_is_skipped_in_one_line(files, model_type):
    code, out, err = run_cli("check", files["trl"], "--model", files[model_type])
    assert code == 1 and not err and "Traceback" not in out
    assert f"sdpa: 1 ERROR(S): model_refuses_batch ({model_type}: attention SOUND, convolution REFUSED here" in out
    skipped = [line for line in out.splitlines() if line.startswith("model run skipped")]
    assert len(skipped) == 1 and "judged from" in skipped[0] and "causal-conv1d" in skipped[0]


@pytest.mark.parametrize("model_type, kinds", [("qwen3_next", "convolution LEAKS, recurrence LEAKS"),
                                               ("lfm2", "convolution LEAKS")])
def test_position_resets_on_a_hybrid_leak_by_layer_kind_and_the_run_agrees(files, model_type, kinds):
    code, out, _ = run_cli("check", files["flat"], "--model", files[model_type])
    assert code == 1 and f"({model_type}: attention SOUND, {kinds})" in out
    assert "model run LEAK" in out and "they agree" in out
    assert "CAUSAL." in out                           # the second check: the model stays causal
    code, out, _ = run_cli("check", files["flat"], "--model-type", model_type)
    assert code == 1 and kinds in out and "model run" not in out


@pytest.mark.parametrize("batch", ["trl", "flat"])
def test_the_same_batches_on_llama_stay_sound(files, batch):
    code, out, _ = run_cli("check", files[batch], "--model", files["llama"])
    assert code == 0 and "sdpa: SOUND (llama: attention SOUND)" in out and "they agree" in out


@pytest.mark.parametrize("model_type", ["roberta", "opt"])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_flattening_on_roberta_and_opt_is_flagged_with_the_model_type_alone_and_with_the_model(files, model_type, impl):
    code, out, _ = run_cli("check", files["flat"], "--model-type", model_type, "--attn-implementation", impl)
    verdict = next(line for line in out.splitlines() if line.startswith(f"{impl}: "))
    assert code == 1 and "ERROR(S): mask_ignores_position_resets" in verdict
    code, out, _ = run_cli("check", files["flat"], "--model", files[model_type], "--attn-implementation", impl)
    assert code == 1 and "mask_ignores_position_resets" in out and "model run LEAK" in out and "they agree" in out


def test_all_implementations_state_attention_and_the_other_layers_on_each_line(files):
    code, out, _ = run_cli("check", files["flat"], "--model-type", "qwen3_next", "--attn-implementation", "all")
    lines = [line for line in out.split("\n\n")[0].splitlines()
             if line.split(":")[0] in ("sdpa", "eager", "flash_attention_2")]   # the summary, one line each
    assert code == 1 and len(lines) == 3
    assert all("(qwen3_next: attention SOUND, convolution LEAKS, recurrence LEAKS); judged for transformers " in line
               for line in lines)


def test_without_a_model_one_note_says_the_verdict_covers_attention_only(files):
    code, out, _ = run_cli("check", files["flat"], "--attn-implementation", "all")
    assert out.count("the verdict covers attention layers only") == 1
    code, out, _ = run_cli("check", files["flat"], "--model-type", "llama")
    assert code == 0 and "attention layers only" not in out
    code, out, _ = run_cli("check", files["flat"], "--format", "json")
    assert "attention layers only" in json.loads(out)["scope"]


def test_the_kernels_of_the_training_machine_can_be_named(files):
    code, out, _ = run_cli("check", files["trl"], "--model-type", "qwen3_next", "--kernel", "causal-conv1d",
                           "--kernel", "flash-linear-attention")
    assert code == 0 and "convolution SOUND, recurrence SOUND" in out


def test_list_model_types_names_the_hybrids_and_the_blind_masks():
    code, out, _ = run_cli("check", "--list-model-types")
    lines = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert code == 0 and "attention + convolution + recurrence" in lines["qwen3_next"]
    assert "mask without position_ids" in lines["opt"] and "mask without" not in lines["llama"]


@pytest.mark.parametrize("argv, says", [
    (["--model-type", "nope"], "unknown model type 'nope'"),
    (["--model-type", "qwen3next"], "unknown model type 'qwen3next': the nearest it knows: qwen3_next, "),
    (["--model-type", "gemma3"], "could not be measured here"),
    (["--kernel", "triton"], "invalid choice"),
])
def test_bad_model_types_are_one_line(files, argv, says):
    code, out, err = run_cli("check", files["flat"], *argv)
    assert code == 2 and says in err and err.count("\n") == 1 and not out


def _folder(tmp_path, name, config, weights=True):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    if weights:
        save_file({"w": np.zeros(2, np.float32)}, str(folder / "model.safetensors"))
    return str(folder)


@pytest.mark.parametrize("config, says", [
    ({"model_type": "my_own_lm", "auto_map": {"AutoModelForCausalLM": "modeling_mine.MyLM"},
      "num_hidden_layers": 2, "hidden_size": 8, "vocab_size": 64}, "unknown model type 'my_own_lm'"),
    ({"model_type": "llama", "num_hidden_layers": 100_000, "hidden_size": 8, "vocab_size": 64}, "100,000"),
    ({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 8, "vocab_size": 1_000_000_000}, "1,000,000,000"),
])
def test_a_folder_the_lab_must_not_load_is_refused_in_one_line(files, tmp_path, config, says):
    code, out, err = run_cli("check", files["flat"], "--model", _folder(tmp_path, "m", config))
    assert code == 2 and says in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_remote_code_model_of_a_known_type_is_still_never_run_with_its_code(files, tmp_path):
    """transformers builds a known model_type from its own class (trust_remote_code=False): the folder's code is
    never imported; the check judges llama's layers and runs transformers' own LlamaForCausalLM."""
    folder = _folder(tmp_path, "remote", {"model_type": "llama", "auto_map": {"AutoModelForCausalLM": "x.Evil"},
                                          "num_hidden_layers": 1, "hidden_size": 8, "intermediate_size": 8,
                                          "num_attention_heads": 1, "vocab_size": 64})
    (tmp_path / "remote" / "x.py").write_text("raise SystemExit('remote code ran')\n")
    code, out, err = run_cli("check", files["flat"], "--model", folder)
    assert code == 0 and "remote code ran" not in out + err and "Traceback" not in out + err
    assert "(llama: attention SOUND)" in out and "they agree" in out


def test_check_with_a_model_runs_the_causality_check_too(files, tmp_path):
    """A 4D mask that lets each document read its future: the static check and the causality run both say so."""
    seg = np.repeat([0, 1, 2], [len(d) for d in DOCS])
    allowed = seg[:, None] == seg[None, :]                       # same document, no causal triangle
    batch = {"input_ids": np.array([sum(DOCS, [])]), "position_ids": np.concatenate([np.arange(len(d)) for d in DOCS])[None],
             "attention_mask": np.where(allowed, 0.0, np.finfo(np.float32).min).astype(np.float32)[None, None]}
    code, out, _ = run_cli("check", saved_batch(tmp_path, "future", batch), "--model", files["llama"])
    assert code == 1 and "mask_reads_future" in out and "FUTURE VISIBLE" in out
