"""Record kinds, detected in one place from the columns: lengths, text, prompt + completion, messages, token ids.

First the formats TRL's ``SFTTrainer`` takes, then data that is already counted::

    messages [{role, content}, ...]   -> "messages"           rendered with the chat template;
                                                              the assistant turns trained
    conversations [{from, value}, ...] -> "messages"          ShareGPT: human, gpt, system read as
                                                              user, assistant, system
    prompt, completion                -> "prompt-completion"  the completion's tokens trained
    length | lengths | n_tokens | num_tokens -> "lengths"     token counts, read as they are
    input_ids [[ids], ...]            -> "token-ids"          pre-tokenised: each list's length
    text                              -> "text"               every token trained

The first that matches wins; a one-column file is read as text.

    >>> detect_kind(["id", "prompt", "completion"])
    'prompt-completion'
    >>> detect_kind(["n_tokens", "url"]), kind_columns("lengths", ["n_tokens", "url"])
    ('lengths', ['n_tokens'])
    >>> kind_columns(detect_kind(["id", "conversations"]), ["id", "conversations"])
    ['conversations']

A record kind is one word with one meaning. Two other words say other things: a kind's
*purpose* (``pretraining`` or ``instruction``: may a document be split, is every token trained?)
comes from :data:`INSTRUCTION_KINDS`, and a file's *type* (a FIFO, a folder) is ``sources.file_type``.

    >>> purpose_of("messages"), purpose_of("text")
    ('instruction', 'pretraining')
"""
from __future__ import annotations

from packing_core._validate import InputError

LENGTH_COLUMNS = ("length", "lengths", "n_tokens", "num_tokens")
CHAT_COLUMNS = ("messages", "conversations")   # OpenAI-style messages, or ShareGPT's conversations
KIND_COLUMNS = {"messages": ("messages",), "prompt-completion": ("prompt", "completion"), "token-ids": ("input_ids",),
                "text": ("text",)}
# in the order a kind is detected: a stored length wins over the text beside it (pass kind="text" to tokenise)
RECORD_KINDS = ("messages", "prompt-completion", "lengths", "token-ids", "text")
COUNTED_KINDS = ("token-ids", "lengths")       # already counted: no tokenizer needed, nothing in the loss masked
ONE_COLUMN_KINDS = ("lengths", "token-ids", "text")   # read by ``columns.column_batches``
# the kinds a profile records: token-id lists are stored as their lengths
PROFILE_KINDS = tuple(k for k in RECORD_KINDS if k != "token-ids")
# what the data is for: pretraining (every token trained, a document may be split) or instruction
PURPOSES = ("pretraining", "instruction")
INSTRUCTION_KINDS = ("messages", "prompt-completion")   # the one map from a record kind to its purpose


def purpose_of(kind: str) -> str:
    """``"instruction"`` for the record kinds of instruction data (a loss mask), else ``"pretraining"``."""
    return "instruction" if kind in INSTRUCTION_KINDS else "pretraining"


def _length_column(columns) -> str | None:
    lower = {str(c).lower(): c for c in columns}
    return next((lower[c] for c in LENGTH_COLUMNS if c in lower), None)


def _chat_column(columns) -> str | None:
    return next((c for c in CHAT_COLUMNS if c in columns), None)


def _shown(columns) -> str:
    columns = list(columns)
    more = f" ... and {len(columns) - 20:,} more" if len(columns) > 20 else ""
    return "[" + ", ".join(map(repr, columns[:20])) + more + "]"


def detect_kind(columns, kind: str | None = None, name: str = "the data") -> str:
    """The record kind of a table with these columns, or ``kind`` checked against them."""
    columns = list(columns)
    if not columns:   # an empty file (a shard a writer left empty) has no columns to detect anything from
        raise InputError(f"{name} is empty: it holds no records; remove it (or fill it) and run again")
    if kind is not None:
        if kind not in RECORD_KINDS:
            raise InputError(f"unknown kind {kind!r}; choose one of {', '.join(RECORD_KINDS)}")
        if kind == "lengths":
            if _length_column(columns) is None and len(columns) != 1:
                raise InputError(f"{name} has no length column ({', '.join(LENGTH_COLUMNS)}) for kind 'lengths' "
                                 f"(columns: {_shown(columns)}); pass column= (--column) naming it")
            return kind
        missing = [c for c in KIND_COLUMNS[kind] if c not in columns]
        if kind == "messages" and _chat_column(columns) is not None:
            missing = []
        if missing and not (kind in ("text", "token-ids") and len(columns) == 1):
            raise InputError(f"{name} has no column {missing[0]!r} for kind {kind!r} (columns: {_shown(columns)}); "
                             "pick the kind that matches the columns")
        return kind
    for k in RECORD_KINDS:
        if k == "lengths":
            found = _length_column(columns) is not None
        elif k == "messages":
            found = _chat_column(columns) is not None
        else:
            found = all(c in columns for c in KIND_COLUMNS[k])
        if found:
            return k
    if len(columns) == 1:
        return "text"
    raise InputError(f"{name} has columns {_shown(columns)}; pass column= (--column) naming a text or length "
                     f"column, or --kind: none is messages (or ShareGPT conversations), prompt + completion, a length column "
                     f"({', '.join(LENGTH_COLUMNS)}), input_ids or text")


def kind_columns(kind: str, columns) -> list[str]:
    """The columns a kind reads (a one-column file read as text reads its only column)."""
    if kind == "lengths":
        found = _length_column(columns)
        return [found] if found is not None else list(columns)[:1]
    chat = _chat_column(columns) if kind == "messages" else None
    if chat is not None:
        return [chat]
    needed = list(KIND_COLUMNS[kind])
    return needed if all(c in columns for c in needed) else list(columns)[:1]
