"""Fixtures for the checks: batches built by the real libraries' own code."""
import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest


def _torchtune_modules():
    """torchtune 0.6.1's PackedDataset and padded_collate_packed, without its package __init__.

    torchtune's __init__ requires torchao, which the lab does not install; the two modules used
    here import only torch, tqdm and torchtune.data._common / modules.attention_utils, so they
    load from the installed wheel's files directly (``scripts/install.sh --dev`` puts it, with
    --no-deps, into .vendor/ or $PACKING_LAB_VENDOR).
    """
    vendor = Path(os.environ.get("PACKING_LAB_VENDOR", Path(__file__).resolve().parents[2] / ".vendor"))
    root = vendor / "torchtune"
    if not (root / "datasets" / "_packed.py").is_file():
        spec = importlib.util.find_spec("torchtune")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = Path(list(spec.submodule_search_locations)[0])
    saved = {k: v for k, v in sys.modules.items() if k == "torchtune" or k.startswith("torchtune.")}
    try:
        for pkg in ("torchtune", "torchtune.data", "torchtune.datasets", "torchtune.modules", "torchtune.utils"):
            m = types.ModuleType(pkg)
            m.__path__ = [str(root.joinpath(*pkg.split(".")[1:]))]
            sys.modules[pkg] = m
        packed = importlib.import_module("torchtune.datasets._packed")
        collate = importlib.import_module("torchtune.data._collate")
        return packed.PackedDataset, collate.padded_collate_packed
    except ImportError:
        return None
    finally:
        for k in [k for k in sys.modules if k == "torchtune" or k.startswith("torchtune.")]:
            del sys.modules[k]
        sys.modules.update(saved)



@pytest.fixture(scope="session")
def torchtune_packing():
    found = _torchtune_modules()
    if found is None:
        pytest.skip("torchtune 0.6.1 is not installed (scripts/install.sh --dev puts it in .vendor/)")
    return found


# a ChatML template with TRL's {% generation %} markers around each answer, so assistant_only_loss can mask prompts
GENERATION_CHATML = (
    "{% for message in messages %}{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\n' }}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\n' }}{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """SmolLM2's own tokenizer (its EOS, <|im_end|>, ends every chat turn), loaded offline."""
    from packing_core.models.tokenizers import load_tokenizer

    try:
        return load_tokenizer("smollm2").hf
    except (ValueError, OSError) as e:
        pytest.skip(f"SmolLM2's tokenizer is not installed here: {e}")


def gsm8k_chats(n: int) -> list[dict]:
    """GSM8K questions and worked answers as chats (system, user, assistant), from the lab's built-in set."""
    from packing_core.data.builtin import load_documents

    try:
        docs = load_documents("gsm8k", n)
    except ValueError as e:
        pytest.skip(f"GSM8K is not installed here: {e}")
    return [{"messages": [{"role": "system", "content": "You are a careful maths tutor."},
                          {"role": "user", "content": d.prompt},
                          {"role": "assistant", "content": d.text[len(d.prompt):].strip()}]} for d in docs]


def trl_sft_batch(tokenizer, chats, *, rows: int, **config):
    """The first batch TRL 1.16's SFTTrainer hands its model, from its own dataset preparation and collator.

    The model is a tiny random-init LlamaForCausalLM (only its vocabulary matters: the trainer never steps).
    """
    import warnings

    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    args = SFTConfig(output_dir="unused", per_device_train_batch_size=rows, report_to="none", use_cpu=True,
                     dataloader_num_workers=0, save_strategy="no", **config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = SFTTrainer(model=LlamaForCausalLM(cfg), args=args, train_dataset=Dataset.from_list(chats),
                             processing_class=tokenizer)
        return dict(next(iter(trainer.get_train_dataloader())))


@pytest.fixture(scope="session")
def trl_chat_batches(smollm2_tokenizer, tmp_path_factory):
    """TRL SFTTrainer batches of GSM8K chats with SmolLM2's tokenizer: packed (bfd, bfd_split), and padded."""
    import copy
    import os

    tok = copy.deepcopy(smollm2_tokenizer)
    tok.chat_template = GENERATION_CHATML
    chats = gsm8k_chats(4)
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("trl"))         # SFTConfig's output_dir is never written (save_strategy="no")
    try:
        return {
            "packed": trl_sft_batch(smollm2_tokenizer, chats[:3], rows=3, packing=True, max_length=1024),
            "bfd": trl_sft_batch(tok, chats, rows=4, packing=True, packing_strategy="bfd", max_length=256,
                                 assistant_only_loss=True),
            "bfd_split": trl_sft_batch(tok, chats, rows=4, packing=True, packing_strategy="bfd_split",
                                       max_length=256, assistant_only_loss=True),
            "padded": trl_sft_batch(tok, chats, rows=4, packing=False, max_length=256, assistant_only_loss=True),
        }
    finally:
        os.chdir(cwd)
