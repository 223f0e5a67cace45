"""The texts a user gives ``verify``: how many, how long, and read from a file within the lab's limits.

    >>> tokenise_texts(lambda ts: {"input_ids": [[1] * len(t) for t in ts]}, ["ab", "cde"])
    [[1, 1], [1, 1, 1]]
    >>> check_texts(["only one"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: give 2 to 4 texts, got 1: ...
"""
from __future__ import annotations

from packing_core._validate import InputError
from packing_core.models.registry import DEFAULT_TEXTS

MIN_TEXTS, MAX_TEXTS = 2, 4   # one document to leak from, one to leak into; a row a class can read
MAX_TEXT_TOKENS = 512         # per text: keeps a CPU verification of SmolLM2 within seconds
MAX_TEXTS_FILE_BYTES = 1 << 20   # 4 texts of 512 tokens fit many times over


def check_texts(texts) -> tuple[str, ...]:
    """The one place the limits on user texts are enforced (the token limit: :func:`tokenise_texts`).

    ``None`` means the default texts; a single string is one text.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = tuple(DEFAULT_TEXTS if texts is None else texts)
    if not MIN_TEXTS <= len(texts) <= MAX_TEXTS:
        raise InputError(f"give {MIN_TEXTS} to {MAX_TEXTS} texts, got {len(texts)}: one to leak from and at "
                         "least one to leak into")
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise InputError(f"text {i} is empty ({t!r}): every text needs at least one word")
    return texts


def tokenise_texts(tokenizer, texts=None) -> list[list[int]]:
    """Token ids of ``texts`` (default :data:`DEFAULT_TEXTS`), within the limits.

    >>> tokenise_texts(lambda ts: {"input_ids": [[1] * len(t) for t in ts]}, ["ab"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: give 2 to 4 texts, got 1: ...
    """
    texts = check_texts(texts)
    try:
        ids = tokenizer(list(texts), add_special_tokens=False)
    except TypeError:   # a plain callable tokenizer (lengths.Tokenizer): no special tokens to add
        ids = tokenizer(list(texts))
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    for i, doc in enumerate(ids):
        if len(doc) > MAX_TEXT_TOKENS:
            raise InputError(f"text {i} is {len(doc):,} tokens long; the limit is {MAX_TEXT_TOKENS} tokens per "
                             "text: shorten it")
        if not doc:
            raise InputError(f"text {i} tokenises to nothing: give it at least one word")
    return [list(d) for d in ids]


def read_texts_file(path) -> list[str]:
    """One text per non-blank line of a UTF-8 file (a regular file of at most ``MAX_TEXTS_FILE_BYTES``).

    Read through ``data.sources.open_source`` as a file read whole: a FIFO or ``/dev/zero`` is
    refused before it is opened, the name is escaped, at most the limit is read.
    """
    from packing_core.data.sources import WHOLE, display, open_source

    raw = open_source(path, WHOLE).read_all(MAX_TEXTS_FILE_BYTES, "the texts file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{display(str(path))} is not UTF-8 text (byte {e.start} is {raw[e.start]:#04x}): save it "
                         "as UTF-8, one text per line") from None
    return [line for line in text.splitlines() if line.strip()]
