"""torchtune 0.6.1's batches: ``PackedDataset`` and ``padded_collate_packed``, read as torchtune's model reads them.

torchtune's attention (``torchtune/modules/attention_utils.py``, ``_sdpa_or_flex_attention``)
calls ``F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])`` with the boolean
block mask (True = may read) on a machine without CUDA flex, and ``flex_attention`` with a
``BlockMask`` built from the same ``seq_lens`` (``packed_block_causal_mask``) where flex runs: the
same blocks. Both are emulated by transformers' sdpa given that mask as a 4D boolean. torchtune
has no eager or flash-attention path that reads a packed batch: those are not in its corpus.
The recipe shifts labels itself (``labels = hstack(labels[..., 1:], ignore)``): they are unshifted.
"""
from __future__ import annotations

import numpy as np

from tests._trainers.truth import Call, Case, documents_from_lengths, hf_targets

TRAINER = "torchtune"
EOS, PAD = 2, 0
SAMPLES = [[1, 11, 12, 13, EOS], [1, 21, 22, EOS], [1, 31, 32, 33, EOS]]
IMPLS = ("sdpa", "flex_attention")
SOURCE = "torchtune 0.6.1: torchtune/datasets/_packed.py PackedDataset; torchtune/data/_collate.py padded_collate_packed"


def packed(split: bool, check=None) -> Case:
    from tests.check.conftest import _torchtune_modules  # the one loader of torchtune's two files

    found = _torchtune_modules()
    if found is None:
        from tests._trainers.vendor import library_file
        library_file("torchtune/datasets/_packed.py")      # skips (fails under CI) naming the install step
    PackedDataset, collate = found
    ds = [{"tokens": s, "labels": [-100] + s[1:]} for s in SAMPLES]
    packs = PackedDataset(ds, max_seq_len=8, split_across_pack=split)
    rows = [packs[i] for i in range(len(packs))]
    batch = collate(rows)
    tokens = batch["tokens"].numpy()
    docs = documents_from_lengths([r["seq_lens"].tolist() for r in rows], tokens.shape[1])
    for r, row in enumerate(rows):          # the padding "sequence" torchtune appends to a short pack
        n = int(row["seq_lens"][-1])
        if (tokens[r, -n:] == PAD).all():
            docs[r, -n:] = -1
    trained, crossing = hf_targets(batch["labels"], docs)
    kwargs = {"input_ids": batch["tokens"], "position_ids": batch["input_pos"],
              "attention_mask": batch["mask"][:, None], "use_cache": False}
    how = "torchtune's _sdpa_or_flex_attention: the boolean block mask (True = may read)"
    calls = {i: Call(kwargs, "sdpa", how) for i in IMPLS}
    return Case(TRAINER, "", batch, np.asarray(docs), trained, crossing, calls, check or {}, SOURCE)


CASES = {
    "packed": lambda: packed(False),
    "packed-split_across_pack": lambda: packed(True),
    # checked with another tokenizer's EOS id, which is torchtune's pad id here: the pad tail is no document
    "packed-mismatched_tokenizer_eos": lambda: packed(False, {"eos_ids": (PAD,)}),
}
