"""Packed batches: the tensors a training step consumes.

The layout of one packed row follows from its document lengths alone::

    lengths [3, 2] -> document_ids [0 0 0 1 1]
                      position_ids [0 1 2 0 1]      (reset at every document)
                      cu_seqlens   [0 3 5]          (np.cumsum with a leading 0)

A *piece* is a document, or one part of a document longer than the context; ``cu_seqlens``
counts pieces, and ``PackedBatch.piece_ids`` gives each token its piece's index there.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from packing_core._validate import POSITIONS, InputError, as_lengths, choice
from packing_core.packing.plan import Plan, cu_seqlens_from_lengths, static_cu_seqlens
from packing_core.packing.strategies import make_plan


@dataclass(frozen=True)
class SegmentLayout:
    """Per-token document ids and position ids for documents laid end to end."""

    document_ids: np.ndarray  # int64 [T]: index of the document each token belongs to
    position_ids: np.ndarray  # int64 [T]: 0 at each document start (or 0..T-1 if continuous)
    cu_seqlens: np.ndarray    # int32 [n + 1]: document boundary offsets, starting at 0


def segment_layout(lengths, positions: str = "reset") -> SegmentLayout:
    """Layout of documents of ``lengths`` placed back to back.

    >>> l = segment_layout([3, 2])
    >>> l.document_ids.tolist(), l.position_ids.tolist(), l.cu_seqlens.tolist()
    ([0, 0, 0, 1, 1], [0, 1, 2, 0, 1], [0, 3, 5])
    >>> segment_layout([3, 2], positions="continuous").position_ids.tolist()
    [0, 1, 2, 3, 4]
    """
    lengths = as_lengths(lengths)
    choice("positions", positions, POSITIONS)
    cu = cu_seqlens_from_lengths(lengths)
    total = int(cu[-1])
    document_ids = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    position_ids = np.arange(total, dtype=np.int64)
    if positions == "reset":
        position_ids = position_ids - cu[:-1][document_ids]
    return SegmentLayout(document_ids, position_ids, cu.astype(np.int32))


IGNORE_INDEX = -100  # the target value that cross-entropy skips (torch and transformers default)


@dataclass(frozen=True)
class FlatBatch:
    """Valid tokens of a batch laid end to end (pads removed): what a varlen kernel consumes."""

    input_ids: "torch.Tensor"       # long [T]
    position_ids: "torch.Tensor"    # long [T]
    cu_seqlens: "torch.Tensor"      # int32 [pieces + 1]: one entry per piece
    max_seqlen: int
    row_offsets: "torch.Tensor"     # int32 [rows + 1]: row boundaries (what the mask bug attends over)


@dataclass(frozen=True, eq=False)
class PackedBatch:
    """The tensors of one packed batch, from token ids and a Plan.

    Two documents ``a b c`` and ``d e`` (no prompts) in one row of context 6::

        input_ids     a  b  c  d  e  <pad>
        piece_ids     0  0  0  1  1  -1        attention: block-diagonal causal
        position_ids  0  1  2  0  1   0        reset at every document
        targets       b  c  -  e  -   -        '-' = -100: never across a document edge
        loss_mask     1  1  0  1  0   0        a separate tensor from the attention description
        cu_seqlens    [0 3 5]                  over valid tokens, pads removed

    With ``prompt_lengths=[2, 0]`` the target ``b`` (a prompt token) leaves the loss
    but ``a b`` stay in attention: the answer must read the question.

    A document longer than the context is split (``overlong="split"``); its
    continuation is a new piece in its row: it cannot attend to its first
    part, so it gets position ids from 0 again, like any document start.
    ``positions="continuous"`` counts across the whole row instead: the twin bug.
    """

    plan: "Plan"
    input_ids: "torch.Tensor"     # long [rows, width]; pad_id on pads
    piece_ids: "torch.Tensor"     # long [rows, width]; the piece (a document, or a part of a split one)
                                  # each token belongs to: its index in cu_seqlens; -1 on pads
    document_ids: "torch.Tensor"  # long [rows, width]; the source document of that piece, -1 on pads
    position_ids: "torch.Tensor"  # long [rows, width]
    targets: "torch.Tensor"       # long [rows, width]; next token inside the piece, else -100
    loss_mask: "torch.Tensor"     # bool [rows, width]; positions whose target is trained
    answer_mask: "torch.Tensor"   # bool [rows, width]; tokens the data marks as trainable (not prompt, not pad)
    cu_seqlens: "torch.Tensor"    # int32 [pieces + 1] over valid tokens of all rows; static shapes:
                                  # [rows x max_docs_per_row + 1], the final offset repeated (zero-length pieces)
    max_seqlen: int               # the longest piece; static shapes: the context
    pad_id: int
    positions: str
    key_mask: "torch.Tensor | None" = None  # bool [rows, width]: the only keys a query may read besides
                                            # itself; None (every sound batch): no key is hidden

    @property
    def valid(self) -> "torch.Tensor":
        """bool [rows, width]: real tokens (not pads)."""
        return self.piece_ids >= 0

    @property
    def row_piece_offsets(self) -> tuple[np.ndarray, ...]:
        """Per row, int64 ``[pieces_in_row + 1]``: where its pieces start inside the row (``Plan.row_piece_offsets``)."""
        return self.plan.row_piece_offsets()

    def __getattr__(self, name: str):
        if name == "dense_mask":   # removed: the batch layer sits below attention, where the mask rule lives
            raise AttributeError("PackedBatch.dense_mask is gone; the mask rule lives in packing_core.attention: "
                                 "allowed(batch.piece_ids[row]) draws the batch's own pieces, "
                                 "packed_attention(batch, 'varlen').allowed(row) what a kernel reads")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @staticmethod
    def from_documents(
        documents,
        context: int,
        strategy: str = "bfd",
        *,
        prompt_lengths=None,
        pad_id: int = 0,
        eos_id: int | None = None,
        positions: str = "reset",
        static_shapes: bool = False,
        **plan_kwargs,
    ) -> "PackedBatch":
        """Plan and fill a batch from token-id lists.

        ``prompt_lengths[i]`` tokens at the start of document ``i`` are prompt: they
        stay in attention but leave the loss. ``eos_id`` appends an EOS token to each
        document (it belongs to the data, so it is trained). Other keyword arguments go
        to ``make_plan`` (``overlong``, ``batch_size``, ``shuffle``, ``seed``,
        ``max_docs_per_row`` ...). ``static_shapes`` needs ``max_docs_per_row``: see
        :meth:`with_static_shapes`.
        """
        if static_shapes and plan_kwargs.get("max_docs_per_row") is None:
            raise InputError("static_shapes=True needs max_docs_per_row (the fixed number of documents a row may "
                             "hold, e.g. 8): cu_seqlens are padded to rows x max_docs_per_row + 1 entries")

        docs = [list(map(int, d)) for d in documents]
        if not docs:
            raise InputError("no documents given: pass at least one list of token ids")
        for i, d in enumerate(docs):
            if not d:
                raise InputError(f"document {i} is empty; every document needs at least one token id")
        choice("positions", positions, POSITIONS)
        prompts = np.zeros(len(docs), np.int64) if prompt_lengths is None else np.asarray(prompt_lengths, np.int64)
        if prompts.shape != (len(docs),):
            raise InputError(f"prompt_lengths needs one entry per document ({len(docs)}), got {len(prompts)}")
        if eos_id is not None:
            docs = [d + [int(eos_id)] for d in docs]
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        if ((prompts < 0) | (prompts >= lengths)).any():
            i = int(np.argmax((prompts < 0) | (prompts >= lengths)))
            raise InputError(
                f"prompt_lengths[{i}] = {prompts[i]} leaves no answer in a document of {lengths[i]} tokens; "
                "a prompt must be shorter than its document"
            )
        plan = make_plan(lengths, context, strategy, **plan_kwargs)
        batch = PackedBatch.from_plan(plan, np.concatenate(docs), prompts, pad_id=pad_id, positions=positions)
        return batch.with_static_shapes(plan_kwargs["max_docs_per_row"]) if static_shapes else batch

    def with_static_shapes(self, max_docs_per_row: int) -> "PackedBatch":
        """The same batch in the shapes a compiled or graph-captured kernel wants, whatever it holds.

        ``cu_seqlens`` get ``rows x max_docs_per_row + 1`` entries: the real offsets, then the final
        offset repeated (each repeat is a zero-length document, which a varlen kernel skips), and
        ``max_seqlen`` is the context. ``input_ids`` and the other grids are ``[rows, context]``
        already for a packing strategy. A row holding more pieces than the cap is refused: plan with
        ``max_docs_per_row`` (``packing.plan.static_cu_seqlens``).

        >>> b = PackedBatch.from_documents([[1] * 5, [2] * 3, [3] * 4], 8, "bfd", max_docs_per_row=3)
        >>> s = b.with_static_shapes(3)
        >>> s.cu_seqlens.tolist(), s.max_seqlen, s.to_hf()["cu_seq_lens_q"].tolist()
        ([0, 5, 8, 12, 12, 12, 12], 8, [0, 5, 8, 12, 12, 12, 12])
        """
        cu = static_cu_seqlens(self.plan, max_docs_per_row)
        return dataclasses.replace(self, cu_seqlens=torch.from_numpy(cu), max_seqlen=int(self.plan.context))

    @staticmethod
    def from_plan(plan, tokens: np.ndarray, prompt_lengths: np.ndarray, *, pad_id: int = 0,
                  positions: str = "reset") -> "PackedBatch":
        """Fill ``plan`` from all documents' tokens concatenated in document order."""
        doc_start = cu_seqlens_from_lengths(plan.lengths)
        n_rows, width = plan.n_rows, int(plan.row_width.max())
        p_doc, p_start, p_len = plan.piece_doc, plan.piece_start, plan.piece_len
        p_row, p_off = plan.piece_row, plan.piece_offset
        # one entry per placed token: the pieces laid end to end, as segment_layout lays documents
        pieces = segment_layout(p_len)
        piece, within = pieces.document_ids, pieces.position_ids
        in_doc = p_start[piece] + within
        dest = p_row[piece] * width + p_off[piece] + within

        def grid(fill, values, dtype):
            out = np.full(n_rows * width, fill, dtype=dtype)
            out[dest] = values
            return out.reshape(n_rows, width)

        ids = tokens[doc_start[p_doc[piece]] + in_doc]
        answer = in_doc >= prompt_lengths[p_doc[piece]]
        last = within == p_len[piece] - 1
        nxt_ok = ~last & np.r_[answer[1:], False]  # the next token is in this piece and trainable
        tgt = np.where(nxt_ok, np.r_[ids[1:], 0], IGNORE_INDEX)
        if positions == "reset":
            pos = within
        else:
            pos = p_off[piece] + within
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
        return PackedBatch(
            plan=plan,
            input_ids=t(grid(pad_id, ids, np.int64)),
            piece_ids=t(grid(-1, piece, np.int64)),
            document_ids=t(grid(-1, p_doc[piece], np.int64)),
            position_ids=t(grid(0, pos, np.int64)),
            targets=t(grid(IGNORE_INDEX, tgt, np.int64)),
            loss_mask=t(grid(False, nxt_ok, bool)),
            answer_mask=t(grid(False, answer, bool)),
            cu_seqlens=t(pieces.cu_seqlens),
            max_seqlen=int(p_len.max()),
            pad_id=int(pad_id),
            positions=positions,
        )

    def flat(self) -> FlatBatch:
        """Valid tokens only, rows laid end to end, with document and row boundaries."""
        valid = self.valid
        per_row = valid.sum(dim=1)
        row_cu = torch.zeros(len(per_row) + 1, dtype=torch.int32)
        row_cu[1:] = torch.cumsum(per_row, 0)
        return FlatBatch(
            input_ids=self.input_ids[valid], position_ids=self.position_ids[valid],
            cu_seqlens=self.cu_seqlens, max_seqlen=self.max_seqlen, row_offsets=row_cu,
        )

    def to_hf(self) -> dict:
        """The padding-free format of transformers' ``DataCollatorWithFlattening``.

        ``labels`` are unshifted (the model shifts them): the batch's own ``targets`` moved one
        token right inside each row, so -100 lands at every piece's first token and on prompt
        tokens exactly where the targets put it. ``cu_seq_lens_q/k`` tell flash-style attention
        where pieces start, so no attention mask is needed.

        >>> hf = PackedBatch.from_documents([[5, 6, 7], [8, 9]], 6, "next-fit").to_hf()
        >>> hf["labels"].tolist(), hf["cu_seq_lens_q"].tolist()
        ([[-100, 6, 7, -100, 9]], [0, 3, 5])
        """
        f = self.flat()
        labels = torch.cat([torch.full_like(self.targets[:, :1], IGNORE_INDEX), self.targets[:, :-1]], 1)
        labels = labels[self.valid]
        return {
            "input_ids": f.input_ids[None],
            "position_ids": f.position_ids[None],
            "labels": labels[None],
            "cu_seq_lens_q": f.cu_seqlens,
            "cu_seq_lens_k": f.cu_seqlens,
            "max_length_q": f.max_seqlen,
            "max_length_k": f.max_seqlen,
        }
