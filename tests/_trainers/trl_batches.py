"""TRL 1.16's batches: ``pack_dataset`` (bfd, bfd_split, wrapped), ``DataCollatorForLanguageModeling``, and
``SFTTrainer`` itself on chat data with ``assistant_only_loss``.

The documents come from what TRL records while packing (the ``seq_lengths`` column of
``pack_dataset``); the trained positions from the collator's labels. ``SFTTrainer.compute_loss``
calls the model with ``use_cache=False`` (trl/trainer/sft_trainer.py, ``inputs["use_cache"] = False``):
its exact keyword arguments are captured with a forward pre-hook on the tiny model.
"""
from __future__ import annotations

import tempfile

import numpy as np
import torch

from tests._trainers.truth import (
    Case,
    documents_from_lengths,
    hf_calls,
    hf_targets,
    model_kwargs,
    smollm2_tokenizer,
    tiny_model,
)

TRAINER = "trl"
EOS = 2
DOCS = [[11, 12, 13, 14, 15, EOS], [21, 22, 23, EOS], [31, 32, 33, 34, EOS], [41, 42, EOS], [51, 52, 53, 54, 55, EOS],
        [61, 62, 63, EOS]]
CHATS = [("Hi", "Hello."), ("Two plus two?", "Four."), ("Sky colour?", "Blue, mostly."), ("Name a fruit", "Apple."),
         ("And a vegetable?", "A leek."), ("Capital of France?", "Paris.")]
SOURCE = "trl 1.16: trl/data_utils.py pack_dataset; trl/trainer/sft_trainer.py DataCollatorForLanguageModeling, SFTTrainer"


def _packed(strategy: str, seq_length: int):
    from datasets import Dataset
    from trl import pack_dataset

    ds = pack_dataset(Dataset.from_dict({"input_ids": DOCS}), seq_length, strategy=strategy)
    return [ds[i] for i in range(len(ds))]


def _collate(rows, **collator):
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(pad_token_id=0, **collator)(rows)


def _flat_documents(rows, width: int) -> np.ndarray:
    """One flattened row (padding-free): every packed row's ``seq_lengths`` in order, pads after."""
    return documents_from_lengths([[n for r in rows for n in r["seq_lengths"]]], width)


def padding_free(strategy="bfd", seq_length=16, use_cache=False, **collator) -> Case:
    rows = _packed(strategy, seq_length)
    batch = _collate(rows, padding_free=True, **collator)
    docs = _flat_documents(rows, batch["input_ids"].shape[1])
    trained, crossing = hf_targets(batch["labels"], docs)
    kind = f"{strategy}-padding_free" + ("-pad_to_multiple" if collator else "") + ("-use_cache" if use_cache else "")
    how = ("a user's own loop: model(**batch) with use_cache at the config's default (True)" if use_cache else
           "SFTTrainer.compute_loss: model(**inputs, use_cache=False)")
    return Case(TRAINER, kind, batch, docs, trained, crossing,
                hf_calls(model_kwargs(batch, use_cache=use_cache), how),
                {"eos_ids": (EOS,), "use_cache": use_cache}, SOURCE)


def position_ids_beside_mask() -> Case:
    """``padding_free=False, return_position_ids=True`` on packed rows: [B, L] with a padding mask and packed positions."""
    rows = _packed("bfd", 12)
    batch = _collate(rows, return_position_ids=True)
    docs = documents_from_lengths([r["seq_lengths"] for r in rows], batch["input_ids"].shape[1])
    trained, crossing = hf_targets(batch["labels"], docs)
    return Case(TRAINER, "bfd-return_position_ids-with_mask", batch, docs, trained, crossing,
                hf_calls(model_kwargs(batch, use_cache=False)), {"eos_ids": (EOS,)}, SOURCE)


def wrapped() -> Case:
    """``strategy="wrapped"``: the documents concatenated and cut into rows; an all-ones attention_mask, labels = input_ids."""
    rows = _packed("wrapped", 8)
    batch = _collate(rows)
    stream = np.cumsum(np.r_[0, np.concatenate(DOCS)[:-1] == EOS])       # the document of each stream token
    B, T = batch["input_ids"].shape
    docs = np.full((B, T), -1)
    flat = stream[:B * T] if len(stream) >= B * T else np.r_[stream, np.full(B * T - len(stream), -1)]
    docs[:] = flat.reshape(B, T)
    docs[batch["attention_mask"].numpy() == 0] = -1
    trained, crossing = hf_targets(batch["labels"], docs)
    return Case(TRAINER, "wrapped", batch, docs, trained, crossing, hf_calls(model_kwargs(batch, use_cache=False)),
                {"eos_ids": (EOS,)}, SOURCE)


def _chat_tokenizer():
    from trl.chat_template_utils import qwen2_5_training_chat_template

    tok = smollm2_tokenizer()
    # a ChatML template with {% generation %} markers, as assistant_only_loss requires; SmolLM2 speaks ChatML
    tok.chat_template = qwen2_5_training_chat_template
    return tok


def sft_trainer(packing: bool) -> Case:
    """``SFTTrainer`` on multi-turn chats with SmolLM2's tokenizer: its own dataset preparation, collator and call.

    ``<|im_end|>`` (the tokenizer's EOS) ends every turn, so EOS is not a document boundary.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tok = _chat_tokenizer()
    chats = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": CHATS[i][0]},
              {"role": "assistant", "content": CHATS[i][1]}, {"role": "user", "content": CHATS[i + 1][0]},
              {"role": "assistant", "content": CHATS[i + 1][1]}] for i in range(0, len(CHATS) - 1)]
    model = tiny_model()
    with tempfile.TemporaryDirectory() as out:
        extra = {"packing_strategy": "bfd_split"} if packing else {}
        args = SFTConfig(output_dir=out, packing=packing, assistant_only_loss=True, max_length=64,
                         per_device_train_batch_size=2, report_to="none", save_strategy="no", use_cpu=True, **extra)
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_dict({"messages": chats}),
                             processing_class=tok)
        rows = [trainer.train_dataset[i] for i in range(2)]
        batch = trainer.data_collator(rows)
        seen: dict = {}
        hook = model.register_forward_pre_hook(lambda m, a, kw: seen.update(kw), with_kwargs=True)
        try:
            with torch.no_grad():
                trainer.compute_loss(model, dict(batch))
        finally:
            hook.remove()
            model.eval()
    width = batch["input_ids"].shape[1]
    if packing:
        docs = _flat_documents(rows, width)
    else:
        docs = documents_from_lengths([[len(r["input_ids"])] for r in rows], width)
    trained, crossing = hf_targets(batch["labels"], docs)
    kwargs = {k: v for k, v in seen.items() if k != "labels"}
    kind = "chat-assistant_only_loss-" + ("bfd_split" if packing else "padded")
    return Case(TRAINER, kind, batch, docs, trained, crossing,
                hf_calls(kwargs, "SFTTrainer.compute_loss, its keyword arguments captured"),
                {"eos_ids": (tok.eos_token_id,)}, SOURCE)


CASES = {
    "bfd-padding_free": lambda: padding_free("bfd", 16),
    "bfd_split-padding_free": lambda: padding_free("bfd_split", 5),
    "bfd-padding_free-pad_to_multiple": lambda: padding_free("bfd", 16, pad_to_multiple_of=32),
    "bfd-padding_free-use_cache": lambda: padding_free("bfd", 16, use_cache=True),
    "bfd-return_position_ids-with_mask": position_ids_beside_mask,
    "wrapped": wrapped,
    "chat-assistant_only_loss-bfd_split": lambda: sft_trainer(True),
    "chat-assistant_only_loss-padded": lambda: sft_trainer(False),
}
