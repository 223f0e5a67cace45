"""Record kinds, detected in one place from the columns: lengths, text, prompt + completion, messages, token ids.

First the formats TRL's ``SFTTrainer`` takes, then data that is already counted::

    messages [{role, content}, ...]   -> "messages"           rendered with the chat template;
                                                              the assistant turns trained
    prompt, completion                -> "prompt-completion"  the completion's tokens trained
    length | lengths | n_tokens | num_tokens -> "lengths"     token counts, read as they are
    input_ids [[ids], ...]            -> "token-ids"          pre-tokenised: each list's length
    text                              -> "text"               every token trained

The first that matches wins; a one-column file is read as text.

    >>> detect_kind(["id", "prompt", "completion"])
    'prompt-completion'
    >>> detect_kind(["n_tokens", "url"]), kind_columns("lengths", ["n_tokens", "url"])
    ('lengths', ['n_tokens'])
"""
from __future__ import annotations

from packing_core._validate import InputError

LENGTH_COLUMNS = ("length", "lengths", "n_tokens", "num_tokens")
KIND_COLUMNS = {"messages": ("messages",), "prompt-completion": ("prompt", "completion"), "token-ids": ("input_ids",),
                "text": ("text",)}
# in the order a kind is detected: a stored length wins over the text beside it (pass kind="text" to tokenise)
RECORD_KINDS = ("messages", "prompt-completion", "lengths", "token-ids", "text")
COUNTED_KINDS = ("token-ids", "lengths")       # already counted: no tokenizer needed, nothing in the loss masked


def _length_column(columns) -> str | None:
    lower = {str(c).lower(): c for c in columns}
    return next((lower[c] for c in LENGTH_COLUMNS if c in lower), None)


def _shown(columns) -> str:
    columns = list(columns)
    more = f" ... and {len(columns) - 20:,} more" if len(columns) > 20 else ""
    return "[" + ", ".join(map(repr, columns[:20])) + more + "]"
def detect_kind(columns, kind: str | None = None, name: str = "the data") -> str:
    """The record kind of a table with these columns, or ``kind`` checked against them."""
    columns = list(columns)
    if kind is not None:
        if kind not in RECORD_KINDS:
            raise InputError(f"unknown kind {kind!r}; choose one of {', '.join(RECORD_KINDS)}")
        if kind == "lengths":
            if _length_column(columns) is None and len(columns) != 1:
                raise InputError(f"{name} has no length column ({', '.join(LENGTH_COLUMNS)}) for kind 'lengths' "
                                 f"(columns: {_shown(columns)}); pass column= (--column) naming it")
            return kind
        missing = [c for c in KIND_COLUMNS[kind] if c not in columns]
        if missing and not (kind in ("text", "token-ids") and len(columns) == 1):
            raise InputError(f"{name} has no column {missing[0]!r} for kind {kind!r} (columns: {_shown(columns)}); "
                             "pick the kind that matches the columns")
        return kind
    for k in RECORD_KINDS:
        if (_length_column(columns) is not None) if k == "lengths" else all(c in columns for c in KIND_COLUMNS[k]):
            return k
    if len(columns) == 1:
        return "text"
    raise InputError(f"{name} has columns {_shown(columns)}; pass column= (--column) naming a text or length "
                     f"column, or --kind: none is messages, prompt + completion, a length column "
                     f"({', '.join(LENGTH_COLUMNS)}), input_ids or text")


def kind_columns(kind: str, columns) -> list[str]:
    """The columns a kind reads (a one-column file read as text reads its only column)."""
    if kind == "lengths":
        found = _length_column(columns)
        return [found] if found is not None else list(columns)[:1]
    needed = list(KIND_COLUMNS[kind])
    return needed if all(c in columns for c in needed) else list(columns)[:1]
