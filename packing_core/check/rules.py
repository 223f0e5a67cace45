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

from dataclasses import asdict, dataclass

SEVERITIES = ("error", "warning", "note")


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str     # error | warning | note
    title: str        # plain language, for pages and the zoo
    fix: str

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
    Rule("kernel_skips_tokens", "error", "The kernel computes nothing for some real tokens",
         "Start the varlen offsets at 0 and cover every real token: flash-attention infers them from the minimum "
         "position, so the row must begin at a document's first position."),
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
         "Harmless at the end of a row, but every pad at position 0 is a one-token sequence to transformers' "
         "packed detection and to cu_seq_lens: pad position_ids with a running arange (one dummy sequence)."),
    Rule("positions_do_not_restart", "warning", "Positions do not restart at the model's first position",
         "Each document's position_ids should start at the model's first position (0 for most, 2 for "
         "RoBERTa-family) and count up by 1: plain RoPE under a correct mask does not change, learned absolute "
         "positions and row-dependent scaled RoPE (dynamic NTK, LongRoPE) do. Where transformers finds documents "
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
    Rule("leaks_under_other_implementation", "note", "Sound here, but another attention implementation leaks",
         "Keep the attention implementation this batch was checked for, or give the batch the boundaries the "
         "other one reads."),
    Rule("cross_document_allowed", "note", "Documents read each other, as allowed",
         "Reading across documents was declared deliberate (--allow-cross-document): GPT-style pretraining streams."),
    Rule("entries_ignored", "note", "Entries the check does not read were ignored",
         "Nothing to fix: non-tensor entries and tensors attention does not read are passed to the model as they "
         "are."),
)

RULES: dict[str, Rule] = {r.name: r for r in _TABLE}
FINDING_NAMES = tuple(RULES)


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
        return RULES[self.name].fix

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"

    def to_dict(self) -> dict:
        return {"name": self.name, "severity": self.severity, "title": self.title, "detail": self.detail,
                "fix": self.fix}
