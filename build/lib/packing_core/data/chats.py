"""Chat records to (length, trained tokens), exactly as the chat template renders them, in batches.

A chat's length is its templated token count, the number ``apply_chat_template(messages,
tokenize=True)`` gives. Its trained tokens are the assistant turns': a turn adds ``len(the chat up
to and including it) - len(the chat up to it, with the generation prompt)`` tokens, its answer and
its end-of-turn marker (what ``{% generation %}`` marks in a template that has the tag).

**Rendered once per shape, counted once per piece.** Chats with the same roles in the same
order (a *shape*) share the template's frames when the template only prints each content
(``chat_template.prints_content_only``): the frames are rendered once, with stand-in contents.
A Hugging Face tokenizer cuts a text at its added tokens (``<|im_start|>``) before anything else
and counts each piece alone (``HFTokenizer.split_tokens``), so a rendering's count is its pieces'
counts plus one per cut. For SmolLM2's template::

    <|im_start|>user\\n{question}<|im_end|>\\n<|im_start|>assistant\\n{answer}<|im_end|>\\n
    pieces:     "user\\n" + question  |  "\\n"  |  "assistant\\n" + answer  |  "\\n"      + 4 cuts

Each piece is built for every chat of a shape at once (Arrow), each distinct text is counted
once, in batches; the prefixes that the trained tokens need share their pieces with the whole
chat, so nothing is counted twice. A template that does more with a content than print it
(``| trim``, ``if '<think>' in content``) is rendered chat by chat and turn by turn
(``records.chat_texts``): as exact, and slower.

    >>> from packing_core.data.chat_template import render
    >>> class Tiny:   # a tokenizer: one token per character, split at "<e>"
    ...     chat_template = "{% for m in messages %}<e>{{ m['role'] }}:{{ m['content'] }}{% endfor %}"
    ...     split_tokens = ("<e>",)
    ...     def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
    ...         return render(self.chat_template, messages, add_generation_prompt)
    ...     def __call__(self, texts):
    ...         return [list(t.replace("<e>", "\\0")) for t in texts]
    >>> chat_lengths([[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]], Tiny(), str)
    (array([22]), array([12]))
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from packing_core._validate import MAX_TEXT_BYTES, MAX_TURNS, InputError
from packing_core.data.chat_template import frames, prints_content_only
from packing_core.data.lengths import count_tokens, token_lengths
from packing_core.data.records import CHAT_ROLES, SHAREGPT_ROLES, chat_texts, render_chat

__all__ = ["chat_lengths", "cut_frames"]

Where = Callable[[int], str]
Piece = tuple[str | int, ...]    # literal texts and message indices, joined in order
_MIX = np.random.default_rng(20240613).integers(1, 2**63, size=MAX_TURNS + 1, dtype=np.uint64)
_NAMES = (*CHAT_ROLES, *SHAREGPT_ROLES)
_CODE = np.array([CHAT_ROLES.index(SHAREGPT_ROLES.get(r, r)) for r in _NAMES], np.int8)


@dataclass(frozen=True)
class _Flat:
    """A batch of chats flattened: message offsets per chat, a role code (``CHAT_ROLES``) and a content per message."""

    offsets: np.ndarray
    roles: np.ndarray
    contents: pa.Array
    sizes: np.ndarray     # characters of each content


def _field(flat: pa.StructArray, names: tuple[str, str]) -> pa.Array | None:
    """``role`` (else ``from``) or ``content`` (else ``value``) of each message, as in ``records.message_fields``."""
    t = flat.type
    cols = [flat.field(n) for n in names if t.get_field_index(n) >= 0]
    if not cols or any(not (pa.types.is_string(c.type) or pa.types.is_large_string(c.type) or pa.types.is_null(c.type))
                       for c in cols):
        return None
    cols = [c.cast(pa.string()) for c in cols]
    return cols[0] if len(cols) == 1 else pc.coalesce(*cols)


def _flatten(column: pa.Array) -> tuple[_Flat | None, np.ndarray]:
    """The chats as flat arrays (None when they are not lists of messages with text fields), and a
    flag per chat for one that ``records.check_messages`` refuses."""
    n, t = len(column), column.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        return None, np.ones(n, bool)
    flat = pc.list_flatten(column)
    role, content = _field(flat, ("role", "from")), _field(flat, ("content", "value"))
    if role is None or content is None:
        return None, np.ones(n, bool)
    turns = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    found = pc.index_in(role, value_set=pa.array(_NAMES))
    bad_message = (flat.is_null().to_numpy(zero_copy_only=False) | found.is_null().to_numpy(zero_copy_only=False)
                   | content.is_null().to_numpy(zero_copy_only=False))
    bad = np.bincount(np.repeat(np.arange(n), turns), weights=bad_message, minlength=n) > 0
    bad |= column.is_null().to_numpy(zero_copy_only=False) | (turns == 0) | (turns > MAX_TURNS)
    codes = _CODE[pc.fill_null(found, 0).to_numpy(zero_copy_only=False)]
    sizes = pc.fill_null(pc.utf8_length(content), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return _Flat(np.concatenate([[0], np.cumsum(turns)]), codes, content, sizes), bad


def _shapes(flat: _Flat, rows: np.ndarray) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """``(roles, chats)`` for each shape among ``rows`` (chats of 1..MAX_TURNS messages), first seen first."""
    if not len(rows):
        return []
    turns, starts = np.diff(flat.offsets)[rows], flat.offsets[rows]
    first_of = np.cumsum(turns) - turns
    owner = np.repeat(np.arange(len(rows)), turns)
    position = np.arange(int(turns.sum())) - first_of[owner]
    codes = flat.roles[starts[owner] + position]
    with np.errstate(over="ignore"):   # a hash of the role sequence, modulo 2**64 by design
        hashed = np.add.reduceat((codes.astype(np.uint64) + np.uint64(1)) * _MIX[position], first_of)
        hashed ^= turns.astype(np.uint64) * _MIX[-1]
    _, first, group = np.unique(hashed, return_index=True, return_inverse=True)
    lead = first[group]
    ref = np.minimum(starts[lead][owner] + position, len(flat.roles) - 1)
    if not ((turns == turns[lead]).all() and (codes == flat.roles[ref]).all()):   # a collision: by value
        keys = [flat.roles[flat.offsets[r]:flat.offsets[r + 1]].tobytes() for r in rows.tolist()]
        group = np.unique(np.array(keys, dtype=object), return_inverse=True)[1]
        first = np.array([int(np.argmax(group == g)) for g in range(int(group.max()) + 1)])
    members = np.split(np.argsort(group, kind="stable"), np.cumsum(np.bincount(group))[:-1])
    out = []
    for g in np.argsort(first, kind="stable").tolist():
        chats = rows[members[g]]
        lead_chat = int(chats[0])
        roles = tuple(CHAT_ROLES[c] for c in flat.roles[flat.offsets[lead_chat]:flat.offsets[lead_chat + 1]].tolist())
        out.append((roles, chats))
    return out


def _safe(frame: str, at: int, token: str, added: tuple[str, ...], left_open: bool, right_open: bool) -> bool:
    """Whether the tokenizer surely matches ``token`` at ``frame[at:]``, whatever contents surround the frame.

    Added tokens are matched leftmost-longest: another one starting before ``token`` and reaching
    into it, or a longer one starting with it, would take its place.
    """
    left, right = frame[:at], frame[at + len(token):]
    ahead = token + right
    for other in added:
        for k in range(1, len(other)):
            tail, head = other[k:], other[:k]
            reaches = ahead.startswith(tail) if len(tail) <= len(ahead) else right_open and tail.startswith(ahead)
            if reaches and (left.endswith(head) if k <= len(left) else left_open and head.endswith(left)):
                return False
        if other != token and other.startswith(token):
            rest = other[len(token):]
            if right.startswith(rest) or (right_open and rest.startswith(right)):
                return False
    return True


def _cut(frame: str, split: tuple[str, ...], added: tuple[str, ...], left_open: bool, right_open: bool) -> list[str]:
    """The frame cut at each split token the tokenizer surely matches there."""
    out, start, at = [], 0, 0
    while at < len(frame):
        token = next((t for t in split if frame.startswith(t, at)), None)
        if token is not None and _safe(frame, at, token, added, left_open, right_open):
            out.append(frame[start:at])
            start = at = at + len(token)
        else:
            at += 1
    return [*out, frame[start:]]


@lru_cache(maxsize=4096)
def cut_frames(frames: tuple[str, ...], split: tuple[str, ...], added: tuple[str, ...]) -> tuple[int, tuple[Piece, ...]]:
    """``(cuts, pieces)`` of a rendering ``frames[0] + content 0 + frames[1] + ...``: its token count is
    ``cuts`` plus the count of each piece (literal texts and message indices, joined).

    >>> cut_frames(("<s>u:", "<e><s>a:", "<e>"), ("<s>", "<e>"), ("<s>", "<e>"))
    (4, (('',), ('u:', 0), ('',), ('a:', 1), ('',)))
    """
    split = tuple(sorted(split, key=len, reverse=True))
    cuts, pieces = 0, []
    current: list[str | int] = []   # the piece being built: texts and message indices
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        parts = _cut(frame, split, added, i > 0, i < last)
        current.append(parts[0])
        for part in parts[1:]:
            pieces.append(current)
            current, cuts = [part], cuts + 1
        if i < last:
            current.append(i)
    pieces.append(current)
    return cuts, tuple(_tidy(p) for p in pieces)


def _tidy(parts: list) -> Piece:
    """Adjacent texts joined, empty ones dropped; a piece of nothing is the empty text."""
    out: list = []
    for p in parts:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        else:
            out.append(p)
    return tuple(p for p in out if p != "") or ("",)


class _Counter:
    """Token counts of pieces: each constant once per batch, each distinct built text once."""

    def __init__(self, tokenizer):
        self.tokenizer, self.constants = tokenizer, {}

    def constant(self, text: str) -> int:
        if text not in self.constants:
            self.constants[text] = int(count_tokens(self.tokenizer, [text])[0]) if text else 0
        return self.constants[text]

    def column(self, texts: pa.Array) -> np.ndarray:
        encoded = texts.dictionary_encode()
        return token_lengths(encoded.dictionary, self.tokenizer)[encoded.indices.to_numpy(zero_copy_only=False)]


def _renderings(roles: tuple[str, ...]) -> list[tuple[int, bool]]:
    """``(messages, generation prompt)`` of each rendering the counts need: the whole chat, and for each
    assistant turn the chat up to it (with the prompt) and up to and including it."""
    out = [(len(roles), False)]
    for j, r in enumerate(roles):
        if r == "assistant":
            out += [(j, True), (j + 1, False)]
    return list(dict.fromkeys(out))


def _shape_counts(tokenizer, counter: _Counter, flat: _Flat, roles: tuple[str, ...], chats: np.ndarray,
                  found: dict, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(lengths, trained, characters of the longest rendering)`` of the chats of one shape;
    None when the template's frames for it cannot be used."""
    split = tuple(getattr(tokenizer, "split_tokens", ()) or ())
    added = tuple(getattr(tokenizer, "added_tokens", ()) or split)
    starts, sizes = flat.offsets[chats], flat.sizes
    built: dict[Piece, np.ndarray] = {}
    counts: dict[tuple[int, bool], np.ndarray] = {}
    longest = np.zeros(len(chats), np.int64)
    for m, gen in _renderings(roles):
        if m == 0:   # an assistant turn first: the empty chat before it fails as it does chat by chat
            render_chat(tokenizer, [], where, gen)
        key = (roles[:m], gen)
        if key not in found:
            found[key] = frames(lambda msgs, g: render_chat(tokenizer, msgs, where, g), roles[:m], gen)
        if found[key] is None:
            return None
        cuts, pieces = cut_frames(found[key], split, added)
        total = np.full(len(chats), cuts, np.int64)
        for piece in pieces:
            if all(isinstance(p, str) for p in piece):
                total += counter.constant("".join(map(str, piece)))
                continue
            if piece not in built:
                parts = [p if isinstance(p, str) else flat.contents.take(pa.array(starts + p)) for p in piece]
                built[piece] = counter.column(parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, ""))
            total += built[piece]
        counts[(m, gen)] = total
        chars = sum(len(f) for f in found[key]) + sum((sizes[starts + i] for i in range(m)), np.zeros(len(chats), np.int64))
        longest = np.maximum(longest, chars)
    lengths = counts[(len(roles), False)]
    trained = sum((counts[(j + 1, False)] - counts[(j, True)] for j, r in enumerate(roles) if r == "assistant"),
                  np.zeros(len(chats), np.int64))
    return lengths, np.clip(trained, 0, lengths), longest


def _one_by_one(values: list, tokenizer, where: Where) -> tuple[np.ndarray, np.ndarray]:
    """Chat by chat and turn by turn: every rendering through the template, then counted in batches."""
    texts, pairs = [], []
    for i, messages in enumerate(values):
        full, spans = chat_texts(tokenizer, messages, where(i))
        texts.append(full)
        pairs.append(spans)
    lengths = count_tokens(tokenizer, texts)
    counts = count_tokens(tokenizer, [t for spans in pairs for span in spans for t in span])
    owner = np.repeat(np.arange(len(pairs)), [len(s) for s in pairs])
    loss = np.bincount(owner, weights=counts[1::2] - counts[0::2], minlength=len(pairs)).astype(np.int64)
    return lengths, np.clip(loss, 0, lengths)


def chat_lengths(column, tokenizer, where: Where) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths, trained tokens)`` of a batch of chats: an Arrow column of message lists (or a list of them).

    ``where(i)`` names chat ``i``. The chat refused is the one a chat-by-chat reading would refuse
    first, with the same message.
    """
    if not callable(getattr(tokenizer, "apply_chat_template", None)) or not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name", getattr(tokenizer, "__name__", "this tokenizer"))
        raise InputError(f"chat data needs a tokenizer with a chat template, and {name} has none; "
                         "choose the smollm2 tokenizer (--tokenizer smollm2) or a tokenizer folder that ships one")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not isinstance(column, pa.Array):
        try:
            column = pa.array(list(column))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return _one_by_one(list(column), tokenizer, where)
    flat, bad = _flatten(column)
    if flat is None or not prints_content_only(tokenizer.chat_template):
        return _one_by_one(column.to_pylist(), tokenizer, where)
    n = len(column)
    lengths, trained, longest = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    stop, failure = int(np.argmax(bad)) if bad.any() else n, None
    counter, found = _Counter(tokenizer), _frames_of(tokenizer)
    for roles, chats in _shapes(flat, np.flatnonzero(~bad)):
        if chats[0] > stop:
            break
        try:
            done = _shape_counts(tokenizer, counter, flat, roles, chats, found, where(int(chats[0])))
        except InputError as e:   # the template refuses this shape: its first chat, unless one before fails
            stop, failure = int(chats[0]), e
            break
        if done is None:    # the stand-ins did not come out intact: this shape chat by chat
            part = _one_by_one(column.take(pa.array(chats)).to_pylist(), tokenizer, _within(where, chats))
            done = (*part, np.zeros(len(chats), np.int64))
        lengths[chats], trained[chats], longest[chats] = done
    over = np.flatnonzero(longest[:stop] > MAX_TEXT_BYTES)
    if over.size or stop < n:   # the first chat refused: chat by chat, for its own message
        i = int(over[0]) if over.size else stop
        if failure is not None and i == stop:
            raise failure
        _one_by_one([column[i].as_py()], tokenizer, lambda _: where(i))
        raise AssertionError(f"chat {i} was flagged, yet it renders: the batch and the chat-by-chat checks disagree")
    return lengths, trained


def _within(where: Where, rows: np.ndarray) -> Where:
    """``where`` for a subset: item ``i`` of it is row ``rows[i]``."""
    return lambda i: where(int(rows[i]))


_FRAMES: dict[tuple, dict] = {}


def _frames_of(tokenizer) -> dict:
    """The frames found so far for this tokenizer's template (one rendering per shape, across batches)."""
    key = (type(tokenizer).__name__, getattr(tokenizer, "vocab_hash", None) or id(tokenizer), tokenizer.chat_template)
    if key not in _FRAMES:
        if len(_FRAMES) >= 8:
            _FRAMES.clear()
        _FRAMES[key] = {}
    if len(_FRAMES[key]) > 4096:   # chats of very many shapes: the memory stays bounded
        _FRAMES[key].clear()
    return _FRAMES[key]
