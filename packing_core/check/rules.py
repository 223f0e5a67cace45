"""The one table of findings: every checker, page, zoo entry and the CLI name a finding from here.

Each finding has one name, one severity, one plain-language title and one fix:

- ``error``: the numbers are wrong (documents read each other, a label across an edge, a pad
  in the loss, a shape the kernel misreads). ``check`` exits 1.
- ``warning``: harmless to these numbers but worth knowing (pads at position 0, a document
  continued from the previous row). Exit 0, unless ``--strict``.
- ``note``: context, e.g. "sound for sdpa but leaks under flash_attention_2".

    >>> RULES["documents_share_attention"].severity
    'error'
    >>> rule("pads_given_position_zero").title
    'Pads are given position 0'
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

SEVERITIES = ("error", "warning", "note")


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str     # error | warning | note
    title: str        # plain language, for pages and the zoo
    fix: str
    action: str = ""  # the fix in one line of at most 20 words (_ACTIONS)

    def to_dict(self) -> dict:
        return asdict(self)


_TABLE = (
    # ---- errors: the numbers are wrong
    Rule("documents_share_attention", "error", "Documents read each other",
         "Give the attention implementation the boundaries it reads: transformers' sdpa/eager/flex find them in "
         "position_ids that restart per document, only with no 2D attention_mask and use_cache=False (or pass a 4D "
         "block mask); flash_attention_2/3 read cu_seq_lens_q/_k with max_length_q/_k, or position_ids in one "
         "flattened row [1, T]."),
    Rule("label_crosses_boundary", "error", "A label crosses a document edge",
         "Set the label of every document's first token to -100 (unshifted labels: transformers shifts them over "
         "the whole row), or the target of its last token (shifted labels)."),
    Rule("label_is_not_the_token", "error", "Labels are not the tokens they sit on",
         "transformers shifts labels itself: pass labels = input_ids with -100 where nothing is trained. Labels "
         "already shifted are shifted twice; if your trainer shifts before the loss, check with --labels shifted."),
    Rule("target_is_not_the_next_token", "error", "A target is not the next token of its document",
         "Shifted labels (targets) hold the next token of the same document, -100 at its last token."),
    Rule("pad_in_loss", "error", "Pads are in the loss", "Give pads label -100 (and keep them out of the loss mask)."),
    Rule("cu_seq_lens_malformed", "error", "cu_seq_lens are malformed",
         "cu_seq_lens start at 0, strictly increase and end within the tokens (build them as [0, *cumsum(lengths)])."),
    Rule("cu_seq_lens_q_differs_from_k", "error", "Query and key boundaries differ",
         "Packed self-attention needs the same cu_seq_lens for queries and keys: pass one tensor for both."),
    Rule("kernel_cannot_read_batch", "error", "The attention implementation cannot read this batch",
         "Pass what this implementation reads (see the detail), or choose one that reads what the batch holds."),
    Rule("mask_reads_future", "error", "Queries read later tokens",
         "The 4D mask, as this implementation applies it, lets a query read keys after it. transformers' eager and "
         "flex add a 4D mask to the scores: give them an additive float mask (0 where a key may be read, "
         "torch.finfo(dtype).min where not: torch.where(mask, 0.0, torch.finfo(dtype).min)), not a boolean or 0/1 "
         "one; sdpa reads a boolean mask as True = may read."),
    Rule("query_reads_nothing", "error", "A query can read no key",
         "Every query must be able to read itself. A row of all -inf gives NaN (eager) and a row of all "
         "finfo.min spreads the weight evenly over every key, other documents and the future included: let each "
         "token (pads too) read at least itself."),
    Rule("max_length_too_small", "error", "max_length_q/_k are shorter than a document",
         "flash-attention's varlen kernel sizes its work by max_length_q/_k: give the longest document's length "
         "(int(cu_seq_lens.diff().max()))."),
    Rule("kernel_skips_tokens", "error", "The kernel computes nothing for some real tokens",
         "Start the varlen offsets at 0 and cover every real token: flash-attention infers them from the minimum "
         "position, so the row must begin at a document's first position."),
    # the layers beyond attention, and the model's own mask call (check.mixers, from attention.families)
    Rule("convolution_reads_previous_document", "error", "A short convolution reads the previous document",
         "A causal convolution of width k reads the k - 1 tokens before each token (k = 4 in Mamba and Gated DeltaNet, "
         "3 in LFM2) and keeps documents apart only when its kernel reads the boundaries in its own form: seq_idx (the "
         "document of each token) for causal-conv1d, cu_seq_lens for flash-linear-attention's ShortConvolution "
         "(CUDA). For causal-conv1d, give the batch seq_idx (TRL's "
         "padding-free collator does; DataCollatorWithFlattening(return_seq_idx=True, return_flash_attn_kwargs=True)) "
         "and install the kernel (causal-conv1d or flash-linear-attention) where the model trains; without either, "
         "do not pack for this model: pad one "
         "document per row."),
    Rule("state_crosses_documents", "error", "A recurrent state runs from one document into the next",
         "A recurrence (Mamba's scan, Gated DeltaNet, RWKV) restarts its state only where its kernel reads the "
         "boundaries (cu_seq_lens in flash-linear-attention, seq_idx in mamba-ssm, CUDA). Give the batch the signal "
         "the detail names, built from the documents (never from an all-ones attention_mask), and install the "
         "kernel; without it, do not pack for this model: pad one document per row."),
    Rule("model_refuses_batch", "error", "The model refuses this batch here",
         "transformers' reference torch code refuses seq_idx and cu_seqlens at a convolution or a recurrence "
         "(integrations.hub_kernels.use_kernel_func_from_hub_with_fallback: \"can't keep packed sequences apart\"): "
         "install the kernel the detail names on the CUDA machine that trains (check with --kernel NAME there), "
         "or pad one document per row. Dropping the signal makes the batch run and leak."),
    Rule("mask_ignores_position_resets", "error", "The model builds its attention mask without position_ids",
         "This model's code calls create_causal_mask without position_ids, so position resets never reach the mask "
         "under sdpa, eager or flex: every document reads the ones before it. Pass a 4D block-causal attention_mask "
         "(0 where a key may be read, torch.finfo(dtype).min where not), or pad one document per row."),
    Rule("logits_differ_beyond_mixers", "error", "Positions shift",
         "Every token-mixing layer keeps the documents apart, yet the logits differ from each document alone: the "
         "model reads positions of its own. BART's decoder counts learned positions over the whole row (it takes "
         "no position_ids): pad one document per row. RoBERTa-like models number positions from padding_idx + 1 "
         "(2 with pad id 1): start position_ids there (DataCollatorWithFlattening(position_ids_start=2), "
         "transformers 5.15 on). Check with --model to measure the real model."),
    Rule("mask_replaces_sliding_window", "error", "A 4D mask drops the sliding window",
         "transformers uses a 4D attention mask as given, so the sliding-window layers read as far back as the mask "
         "lets them and a document longer than the window trains on keys the model never sees alone. Build the 4D "
         "mask with the window too (a key at most window - 1 tokens back), or pass position_ids and no mask "
         "(transformers then builds the windowed mask per document), or cu_seq_lens for flash_attention_2."),
    Rule("implementation_not_offered", "warning", "The model cannot run this attention implementation",
         "transformers builds this family with eager attention only (from_pretrained(attn_implementation='sdpa') "
         "raises): judge the batch with --attn-implementation eager, the implementation it runs."),
    Rule("release_not_measured", "warning", "Unmeasured release",
         "The lab's rules are read and measured for a span of transformers releases (docs/checker-releases.md); "
         "outside it a verdict would be a guess. Run `python -m packing_core check --model DIR batch` in the "
         "trainer's environment (it runs the batch on the model there), or judge for a measured release with "
         "--transformers VERSION."),
    Rule("future_visible", "error", "A later token changes an earlier output",
         "Attention is not causal: a query reads keys after it. A varlen kernel is causal only if asked "
         "(flash_attn_varlen_func(causal=True); torch's varlen_attn(window_size=(-1, 0)): both default to full "
         "attention), a 4D mask must be lower-triangular inside each document, and a bidirectional model "
         "(RoBERTa without is_decoder=True) is no causal LM."),
    # context parallelism: a rank's batch, or every rank's (check.ranks)
    Rule("cp_document_not_padded", "error", "A document is not padded to a multiple of 2·CP",
         "Pad every document to a multiple of 2·CP before the cut (with sequence parallelism, of lcm(2·CP, TP·CP)); "
         "keep its real length in cu_seqlens and the padded one in cu_seqlens_padded. Transformer Engine's THD "
         "partition divides each offset by CP and halves it, so a 7-token document at CP 2 is computed as 6 "
         "(NVIDIA/TransformerEngine #1930)."),
    Rule("cp_unpadded_offsets", "error", "Unpadded offsets are read where padded ones are needed",
         "Lay out and index a rank's chunks with cu_seqlens_padded, and give the kernel the real cu_seqlens beside "
         "them: pass Transformer Engine pad_between_seqs=True whenever any document, the last one too, is shorter "
         "than its padded slot (its False path reads cu_seqlens // CP: NVIDIA/TransformerEngine #3331), and roll "
         "a rank's chunks on the padded offsets (NVIDIA/Megatron-LM #4495)."),
    Rule("cp_interior_padding_as_tail", "error", "Padding between documents is read as a tail",
         "Once documents are padded for CP, pads sit after every document, not only at the end: find a rank's "
         "real tokens from its padding mask or its per-document offsets, never as its first n_real slots "
         "(NVIDIA-NeMo/Automodel #3640)."),
    Rule("cp_chunks_not_the_scheme", "error", "A rank holds chunks its scheme does not give it",
         "Cut with the scheme's own partition: under zigzag rank r holds chunks r and 2·CP-1-r of each unit "
         "(Transformer Engine's thd_get_partitioned_indices, given cu_seqlens_padded trimmed of any sentinel "
         "entries: NVIDIA-NeMo/Megatron-Bridge #4489), under contiguous window r."),
    # only a PackedBatch (the lab's own tensors) can show these
    Rule("cu_seqlens_not_monotone", "error", "cu_seqlens do not rise from 0",
         "cu_seqlens start at 0 and strictly increase."),
    Rule("cu_seqlens_wrong_total", "error", "cu_seqlens do not end at the real tokens",
         "cu_seqlens end at the number of real (non-pad) tokens."),
    Rule("segments_disagree_with_cu_seqlens", "error", "Segment ids and cu_seqlens disagree",
         "Build cu_seqlens from the documents (one offset per document piece), not from the rows."),
    Rule("pad_in_attention", "error", "A pad belongs to a document segment",
         "Give pads segment id -1, outside every document."),
    Rule("loss_mask_disagrees_with_targets", "error", "The loss mask and the targets disagree",
         "The loss mask is true exactly where the target is not -100."),
    Rule("loss_count_mismatch", "error", "Loss positions are not the answer tokens",
         "Train exactly the answer tokens that have a predecessor in their document (no prompts, no pads)."),
    # ---- warnings: harmless to the numbers, worth knowing
    Rule("pads_given_position_zero", "warning", "Pads are given position 0",
         "Harmless to the numbers at the end of a row, but every pad at position 0 is a one-token sequence to "
         "transformers' packed detection and to the varlen offsets derived from it: one more sequence per pad, and "
         "a kernel call whose shape changes with the pad count each step (recompiles under torch.compile, VeOmni "
         "PR #746). Pad position_ids with one running arange (0, 1, 2, ...: one dummy sequence)."),
    Rule("untrained_tokens_share_attention", "warning", "Only untrained tokens read another document",
         "No trained position reads another document, directly or through a later layer, so the loss is "
         "unchanged; the outputs at these positions are not those of their document alone. Give them the same "
         "boundaries as the rest if anything reads them (evaluation, a reward model)."),
    Rule("megatron_mask_needs_unfused_softmax", "warning", "Only Megatron's unfused attention applies this mask",
         "Megatron-core applies a 4D attention_mask only in its local DotProductAttention with the PyTorch softmax "
         "(FusedScaleMaskSoftmax.forward_torch_softmax: masked_fill(mask, -10000.0)). Every GPT layer spec builds "
         "self-attention with attn_mask_type=causal, and then the fused softmax kernel (masked_softmax_fusion with "
         "fp16/bf16: ScaledUpperTriangMaskedSoftmax) and Transformer Engine apply the causal triangle and ignore the "
         "mask (NVIDIA/Megatron-LM #415): documents read each other there. For document masking on those backends "
         "pass packed_seq_params (PackedSeqParams with cu_seqlens_q/_kv, max_seqlen_q/_kv, qkv_format='thd')."),
    Rule("tokenizer_does_not_fit", "warning", "The tokenizer given did not tokenise this batch",
         "Give the tokenizer the batch was built with (or --eos-id N): its EOS id was not used as evidence."),
    Rule("positions_do_not_restart", "warning", "Positions do not restart at the model's first position",
         "Each document's position_ids should start at the model's first position (0 for most, 2 for "
         "RoBERTa-family) and count up by 1: plain RoPE under a correct mask does not change, learned absolute "
         "positions and scaled RoPE that reads the batch do (dynamic NTK and LongRoPE pick their frequencies from "
         "the largest position in the batch). Where transformers finds documents "
         "from position_ids, it starts one at every step that is not +1 (sdpa/eager) or at every return to the "
         "minimum position (FlashAttention, one flattened row), so there continuous positions also remove the mask."),
    Rule("document_continues_from_previous_row", "warning", "A document continues from the previous row",
         "A document split across rows cannot read its first part (torchtune's split_across_pack=True): fine for "
         "pretraining streams; for instruction data keep documents whole."),
    Rule("boundaries_disagree", "warning", "The batch's boundary evidence disagrees",
         "cu_seq_lens, position_ids, label separators and EOS tokens should start documents at the same tokens: "
         "each attention implementation reads a different one."),
    Rule("no_document_boundaries", "warning", "The batch marks no document boundaries",
         "If rows hold several documents separated only by EOS tokens (TRL's wrapped packing, pretraining "
         "streams), they read each other: pass --tokenizer or --eos-id so the check can find them."),
    # ---- notes: context
    Rule("eos_inside_document", "note", "An EOS id falls inside a document",
         "Nothing to fix: stronger evidence (cu_seq_lens, position resets, label separators, padded rows) marks the "
         "documents, and an EOS id inside one ends a chat turn (<|im_end|> ends every turn of a ChatML template)."),
    Rule("fixed_size_chunks", "note", "The batch cuts a stream into chunks of one length",
         "Wrapped packing cuts the token stream every max_length tokens, not at documents: the EOS ids mark the "
         "documents, and they read each other unless something else separates them."),
    Rule("document_ids_in_attention_mask", "note", "The attention_mask numbers documents",
         "transformers 5.x casts a 2D attention_mask to booleans (masking_utils._preprocess_mask_arguments) before "
         "sdpa, eager, flex or flash sees it, so document numbers are lost unless the trainer patches the reading: "
         "pass position_ids that restart per document and no attention_mask (padding-free), or cu_seq_lens_q/_k "
         "with max_length_q/_k, or a 4D block mask."),
    Rule("additive_mask_finite", "note", "The additive mask masks with a finite value",
         "Nothing to fix for a trained model's scores: a finite value such as -1e4 leaves masked keys a weight "
         "that rounds to 0 in float16 and bfloat16 softmax (see the detail). transformers writes "
         "torch.finfo(dtype).min, which also spreads a query whose keys are all masked over every key; -inf gives "
         "such a query NaN instead."),
    Rule("mask_convention_read", "note", "The 4D mask's convention was read",
         "Nothing to fix. transformers and torch's sdpa read True = may read; Megatron-core and TransformerEngine "
         "read True = masked: give a mask only to the code it was built for (invert it with ~mask otherwise)."),
    Rule("rotary_positions_read", "note", "Multimodal rotary positions were read",
         "Nothing to fix. For packed inputs to Qwen2-VL, Qwen3-VL and Qwen3.5, give [4, batch, tokens] positions "
         "with the text positions first (row 0): transformers reads that row for the mask and for flash-attention; "
         "[3, batch, tokens] give it none, so only cu_seq_lens keep documents apart."),
    Rule("zero_length_documents", "note", "cu_seq_lens hold zero-length documents",
         "Nothing to fix: offsets padded to a fixed count (a repeated offset is an empty document) keep the kernel's "
         "shapes static for torch.compile and CUDA graphs (torchtitan PR #4158); varlen kernels skip them, though "
         "some validators once refused them (Megatron-LM PR #3282)."),
    Rule("signal_not_read_by_implementation", "note", "A boundary signal this implementation does not read",
         "The batch marks documents in a tensor that this attention implementation does not read (see the detail "
         "for who does): judge it for the layers or the trainer that read it."),
    Rule("cross_document_targets_allowed", "note", "Targets cross documents, as allowed",
         "Training the EOS -> next document target was declared deliberate (--allow-cross-document), as in "
         "run_clm and Megatron's default pretraining streams."),
    Rule("leaks_under_other_implementation", "note", "Sound here, but another attention implementation leaks",
         "Keep the attention implementation this batch was checked for, or give the batch the boundaries the "
         "other one reads."),
    Rule("cross_document_allowed", "note", "Documents read each other, as allowed",
         "Reading across documents was declared deliberate (--allow-cross-document): GPT-style pretraining streams."),
    Rule("entries_ignored", "note", "Entries the check does not read were ignored",
         "Nothing to fix: non-tensor entries and tensors attention does not read are passed to the model as they "
         "are."),
)

# Each finding's fix in one line of at most 20 words, an order to follow: what a page shows first, in the finding's
# colour, with the detail and the whole fix folded under it (tests/check/test_rules_actions.py holds the count).
_ACTIONS = {
    "mask_replaces_sliding_window": "Apply the model's sliding window in your 4D mask too, or pass position_ids and "
                                    "no mask.",
    "documents_share_attention": "Give the reader the boundaries it reads: restarting position_ids with no 2D mask and "
                                 "no cache, or cu_seq_lens.",
    "label_crosses_boundary": "Set the label of each document's first token to -100.",
    "label_is_not_the_token": "Pass labels = input_ids with -100 where nothing is trained; transformers shifts them itself.",
    "target_is_not_the_next_token": "Make each target the next token of its own document, and -100 at its last token.",
    "pad_in_loss": "Give pads label -100, and keep them out of the loss mask.",
    "cu_seq_lens_malformed": "Build cu_seq_lens as [0, *cumsum(lengths)]: from 0, strictly increasing, within the tokens.",
    "cu_seq_lens_q_differs_from_k": "Pass one cu_seq_lens tensor for both queries and keys.",
    "kernel_cannot_read_batch": "Pass what this implementation reads (see the details), or choose one that reads this batch.",
    "mask_reads_future": "Give eager and flex an additive float mask (0 or finfo.min), not a boolean or 0/1 mask.",
    "query_reads_nothing": "Let every token, pads included, read at least itself.",
    "max_length_too_small": "Set max_length_q/_k to the longest document: int(cu_seq_lens.diff().max()).",
    "kernel_skips_tokens": "Start the varlen offsets at 0 and cover every real token.",
    "convolution_reads_previous_document": "Give the batch seq_idx and install causal-conv1d where the model trains, or "
                                           "pad one document per row.",
    "state_crosses_documents": "Give the recurrence its boundary signal and install its kernel, or pad one document per "
                               "row.",
    "model_refuses_batch": "Install the kernel the details name on the training machine, or pad one document per row.",
    "mask_ignores_position_resets": "Pass a 4D block-causal attention_mask, or pad one document per row.",
    "future_visible": "Make attention causal: causal=True for a varlen kernel, a lower-triangular mask inside each "
                      "document.",
    "cu_seqlens_not_monotone": "Start cu_seqlens at 0 and make them strictly increase.",
    "cu_seqlens_wrong_total": "End cu_seqlens at the number of real (non-pad) tokens.",
    "segments_disagree_with_cu_seqlens": "Build cu_seqlens from the documents, one offset per document piece, not from "
                                         "the rows.",
    "pad_in_attention": "Give pads segment id -1, outside every document.",
    "loss_mask_disagrees_with_targets": "Make the loss mask true exactly where the target is not -100.",
    "loss_count_mismatch": "Train exactly the answer tokens that have a predecessor in their document: no prompts, no "
                           "pads.",
    "pads_given_position_zero": "Pad position_ids with one running arange (0, 1, 2, ...), not zeros.",
    "untrained_tokens_share_attention": "Give these positions the same boundaries as the rest if anything reads their "
                                        "outputs.",
    "megatron_mask_needs_unfused_softmax": "Pass packed_seq_params (cu_seqlens_q/_kv, qkv_format='thd') for document "
                                           "masking on fused backends.",
    "tokenizer_does_not_fit": "Give the tokenizer the batch was built with, or --eos-id N.",
    "positions_do_not_restart": "Restart position_ids at each document's first position (0 for most models), counting "
                                "up by 1.",
    "document_continues_from_previous_row": "Keep documents whole for instruction data; a split is fine in pretraining "
                                            "streams.",
    "boundaries_disagree": "Make cu_seq_lens, position_ids, label separators and EOS tokens start documents at the same "
                           "tokens.",
    "no_document_boundaries": "Pass --tokenizer or --eos-id so the check can find documents separated only by EOS.",
    "fixed_size_chunks": "Pack whole documents (TRL's bfd) if each must stay apart; nothing to fix if intended.",
    "document_ids_in_attention_mask": "Pass restarting position_ids and no attention_mask, or cu_seq_lens_q/_k, or a 4D "
                                      "block mask.",
    "signal_not_read_by_implementation": "Judge the batch for the layers or trainer that read that signal.",
    "leaks_under_other_implementation": "Keep the attention implementation this batch was checked for.",
    "cross_document_targets_allowed": "Nothing to fix: declared deliberate (--allow-cross-document).",
    "cross_document_allowed": "Nothing to fix: declared deliberate (--allow-cross-document).",
}
RULES: dict[str, Rule] = {r.name: replace(r, action=_ACTIONS.get(r.name, "Nothing to fix.")) for r in _TABLE}
FINDING_NAMES = tuple(RULES)
_SENTENCE_END = re.compile(r"(?<=[\w)\]'])\.\s")


def first_sentence(text: str) -> str:
    """The text up to its first full stop: an advice's order, before its reasons.

    >>> first_sentence("Drop the all-ones attention_mask: see torch.where(m). TRL: padding_free=True.")
    'Drop the all-ones attention_mask: see torch.where(m).'
    """
    m = _SENTENCE_END.search(text)
    return text[:m.start() + 1] if m else text


def rule(name: str) -> Rule:
    """The rule of finding ``name``; an unknown name is a bug, said plainly."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"unknown finding {name!r}: the findings are {', '.join(FINDING_NAMES)}") from None


@dataclass(frozen=True)
class Finding:
    """One named result of a check: ``detail`` says where, with the offending values."""

    name: str
    detail: str
    severity: str = ""                         # "" = the rule's own; --allow-cross-document lowers leaks to notes
    marks: tuple[tuple[int, int], ...] = ()    # (row, token) of each token it points at, for a figure
    advice: str = ""                           # a fix for this batch's trainer, where its shape names one

    def __post_init__(self):
        r = rule(self.name)
        if not self.severity:
            object.__setattr__(self, "severity", r.severity)
        elif self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}: choose one of {', '.join(SEVERITIES)}")

    @property
    def title(self) -> str:
        return RULES[self.name].title

    @property
    def fix(self) -> str:
        """The fix for this batch's trainer where the check knows it, else the rule's general fix."""
        return self.advice or RULES[self.name].fix

    @property
    def action(self) -> str:
        """The fix in one line of at most 20 words: the advice's first sentence, else the rule's action.

        >>> Finding("pad_in_loss", "row 0: 3 pads").action
        'Give pads label -100, and keep them out of the loss mask.'
        """
        return first_sentence(self.advice) if self.advice else RULES[self.name].action

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"

    def to_dict(self) -> dict:
        return {"name": self.name, "severity": self.severity, "title": self.title, "detail": self.detail,
                "fix": self.fix}
