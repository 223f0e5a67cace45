"""torchtune 0.6.1's batches: ``PackedDataset`` and ``padded_collate_packed``, and what reads them.

``padded_collate_packed`` (torchtune/data/_collate.py) turns each pack's ``seq_lens`` into its mask
with ``packed_block_causal_mask`` (torchtune/modules/attention_utils.py): a ``BlockMask`` for flex
where ``_SUPPORTS_FLEX_ATTENTION`` (CUDA, compute capability >= 7.5), else
``create_block_causal_mask``'s boolean ``[B, T, T]`` block-causal tensor (True = may read): the
batch here, built on a CPU. torchtune's model (``_sdpa_or_flex_attention``) hands a tensor mask to
``F.scaled_dot_product_attention(attn_mask=mask[:, None])`` in both of its branches (flex only
takes a ``BlockMask``): exactly transformers' ``sdpa`` given the same ``[B, 1, T, T]`` mask, so
torchtune's own reading is the ``sdpa`` column. The other four columns are a transformers model
given the batch (``tokens`` as ``input_ids``, ``input_pos`` as ``position_ids``): eager and flex
*add* a 4D mask to the scores (``modeling_llama.eager_attention_forward``;
``integrations/flex_attention.py`` ``flex_attention_forward``: ``score + score_mask[b][0][q][kv]``,
no block mask), so a boolean one masks nothing there; flash refuses a 4D mask.
The recipe shifts labels itself (``labels = hstack(labels[..., 1:], ignore)``): they are unshifted.

The corpus once let ``flex_attention`` mean torchtune's own flex path. That path takes only a ``BlockMask``
(torchtune/modules/attention_utils.py ``_sdpa_or_flex_attention``; ``packed_block_causal_mask`` builds one only on
CUDA): a batch holding the boolean ``[B, T, T]`` mask is read by ``F.scaled_dot_product_attention`` in both branches,
which is transformers' ``sdpa`` column. transformers' flex adds a 4D mask in its ``score_mod``
(integrations/flex_attention.py ``flex_attention_forward``), so there the boolean mask masks nothing: a leak.
"""
from __future__ import annotations

import numpy as np

from tests._trainers.truth import IMPLEMENTATIONS, Case, documents_from_lengths, hf_calls, hf_targets

TRAINER = "torchtune"
EOS, PAD = 2, 0
SAMPLES = [[1, 11, 12, 13, EOS], [1, 21, 22, EOS], [1, 31, 32, 33, EOS]]
IMPLS = IMPLEMENTATIONS
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
    calls = hf_calls(kwargs, "the boolean block mask as [B, 1, T, T]; sdpa is torchtune's own _sdpa_or_flex_attention")
    return Case(TRAINER, "", batch, np.asarray(docs), trained, crossing, calls, check or {}, SOURCE)


CASES = {
    "packed": lambda: packed(False),
    "packed-split_across_pack": lambda: packed(True),
    # checked with another tokenizer's EOS id, which is torchtune's pad id here: the pad tail is no document
    "packed-mismatched_tokenizer_eos": lambda: packed(False, {"eos_ids": (PAD,)}),
}
