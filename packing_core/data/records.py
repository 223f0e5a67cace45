"""Records of each kind to (length, loss tokens): chat rendering, prompt + completion, counted lengths.

The kind itself is detected in :mod:`packing_core.data.kinds`.

A chat sample's length is the templated token count, the same number
``tokenizer.apply_chat_template(messages, tokenize=True)`` gives. Its loss tokens are
found by rendering turn by turn: an assistant turn adds ``len(up to and including
it) - len(up to it, with the generation prompt)`` tokens, the answer and its
end-of-turn marker. A prompt/completion pair is tokenised as ``prompt + completion``
and the completion's tokens are those past ``len(prompt)``, as TRL does.

    >>> from packing_core.data.lengths import byte_tokenizer
    >>> record_lengths({"text": ["hi", " ", "hello"]}, "text", byte_tokenizer, str)
    (array([2, 0, 5]), None)

The tokenizer is passed in (this layer never imports transformers): a callable
``list[str] -> list[list[int]]``, plus ``apply_chat_template`` for chat data.
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager

import numpy as np

from packing_core._validate import MAX_LENGTH, MAX_TEMPLATE_SECONDS, MAX_TEXT_BYTES, MAX_TURNS, InputError
from packing_core.data.kinds import COUNTED_KINDS
from packing_core.data.lengths import count_tokens

ROLES = ("system", "user", "assistant", "tool")


def _text(value, what: str, where: str) -> str:
    if value is None:
        raise InputError(f"{where} has no {what}; fill it in or drop that record")
    if not isinstance(value, str):
        raise InputError(f"{where}: {what} is {type(value).__name__}, not text; store it as a string")
    return value


def _check_messages(messages, where: str) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: messages must be a non-empty list of {{role, content}}, got "
                         f"{type(messages).__name__}")
    if len(messages) > MAX_TURNS:   # each answer renders the chat up to it: turns^2 work
        raise InputError(f"{where}: {len(messages):,} messages in one chat, more than the lab renders "
                         f"({MAX_TURNS:,}); split the conversation into shorter samples")
    for turn, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") is None:
            raise InputError(f"{where}: message {turn} has no role; every message needs a role "
                             f"({', '.join(ROLES)}) and a content")
        if m["role"] not in ROLES:
            raise InputError(f"{where}: message {turn} has an unknown role {m['role']!r}; use one of {', '.join(ROLES)}")
        if not isinstance(m.get("content"), str):
            raise InputError(f"{where}: message {turn} ({m['role']}) has no text content")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


class _TemplateTimeout(BaseException):   # not Exception: a library's `except Exception` must not swallow it
    pass


@contextmanager
def _time_limit(seconds: float):
    """Raise ``_TemplateTimeout`` in this thread after ``seconds``.

    The main thread (the CLI, scan workers) uses a signal timer, which costs nothing until
    it fires. Other threads (the app's script runner) cannot receive signals: there a trace
    function checks the clock as each line of Python runs (jinja compiles templates to
    Python), which slows the rendering a few times but still stops it on time.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        deadline = time.monotonic() + seconds

        def tracer(frame, event, arg):
            if time.monotonic() > deadline:
                raise _TemplateTimeout
            return tracer

        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            yield
        finally:
            sys.settrace(previous)
        return

    def expire(signum, frame):
        raise _TemplateTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _render(tokenizer, messages, where: str, generation: bool = False) -> str:
    """The chat rendered by the tokenizer's template, within ``MAX_TEMPLATE_SECONDS`` and ``MAX_TEXT_BYTES``.

    A template is code from a file: a loop nested in a loop can run for hours or print
    gigabytes, so each rendering runs under a timer and its output is bounded.
    """
    prepare = getattr(tokenizer, "prepare_chat_template", None)
    if callable(prepare):
        prepare()   # loading the library is not rendering: outside the timer
    try:
        with _time_limit(MAX_TEMPLATE_SECONDS):
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
    except _TemplateTimeout:
        raise InputError(f"{where}: the chat template took more than {MAX_TEMPLATE_SECONDS:g} s to render one "
                         "chat (loops nested in the template?); fix the tokenizer's template") from None
    except Exception as e:  # noqa: BLE001  (jinja raises anything; one line that names the record)
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise InputError(f"{where}: the chat template failed ({type(e).__name__}: {first}); check the messages "
                         "or the tokenizer's template") from None
    if not isinstance(text, str):
        raise InputError(f"{where}: the chat template returned {type(text).__name__}, not text")
    if len(text) > MAX_TEXT_BYTES:
        raise InputError(f"{where}: the chat template rendered {len(text):,} characters, more than one document "
                         f"may hold ({MAX_TEXT_BYTES:,}); shorten the chat or fix the template")
    return text


def chat_texts(tokenizer, messages: list[dict], where: str) -> tuple[str, list[tuple[str, str]]]:
    """The templated conversation, and (before, after) texts around each assistant turn."""
    messages = _check_messages(messages, where)
    spans = [(_render(tokenizer, messages[:i], where, generation=True), _render(tokenizer, messages[: i + 1], where))
             for i, m in enumerate(messages) if m["role"] == "assistant"]
    return _render(tokenizer, messages, where), spans


def record_lengths(batch: dict[str, list], kind: str, tokenizer, where) -> tuple[np.ndarray, np.ndarray | None]:
    """``(lengths, loss_tokens)`` of one batch of records; ``loss_tokens`` None for plain text.

    A blank text gets length 0: it is no document, and the scan skips it (as ``lengths_from_file`` does).
    """
    if kind == "text":   # blank texts get length 0: no document, skipped by the scan
        (values,) = batch.values()
        texts = [v if isinstance(v, str) and v.strip() else "" for v in values]
        return count_tokens(tokenizer, texts), None
    if kind in COUNTED_KINDS:
        return _counted(next(iter(batch.values())), kind, where), None
    if kind == "prompt-completion":
        prompts = [_text(p, "prompt", where(i)) for i, p in enumerate(batch["prompt"])]
        completions = [_text(c, "completion", where(i)) for i, c in enumerate(batch["completion"])]
        full = count_tokens(tokenizer, [p + c for p, c in zip(prompts, completions)])
        prompt = count_tokens(tokenizer, prompts)
        return full, np.maximum(full - prompt, 0)
    if not callable(getattr(tokenizer, "apply_chat_template", None)) or not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name", getattr(tokenizer, "__name__", "this tokenizer"))
        raise InputError(f"chat data needs a tokenizer with a chat template, and {name} has none; "
                         "choose the smollm2 tokenizer (--tokenizer smollm2) or a tokenizer folder that ships one")
    texts, pairs = [], []
    for i, messages in enumerate(batch["messages"]):
        full, spans = chat_texts(tokenizer, messages, where(i))
        texts.append(full)
        pairs.append(spans)
    lengths = count_tokens(tokenizer, texts)
    flat = [t for spans in pairs for span in spans for t in span]
    counts = count_tokens(tokenizer, flat)
    per_turn = counts[1::2] - counts[0::2]
    owner = np.repeat(np.arange(len(pairs)), [len(s) for s in pairs])
    loss = np.bincount(owner, weights=per_turn, minlength=len(pairs)).astype(np.int64)
    return lengths, np.clip(loss, 0, lengths)


def _counted(values: list, kind: str, where) -> np.ndarray:
    """Lengths of records that are already counted: token-id lists, or integer lengths (>= 1).

    >>> _counted([[5, 9], [1, 2, 3]], "token-ids", str).tolist(), _counted(["7", 3], "lengths", str).tolist()
    ([2, 3], [7, 3])
    """
    out = np.zeros(len(values), np.int64)
    for i, v in enumerate(values):
        if kind == "token-ids":
            if not isinstance(v, (list, tuple)) or not all(type(t) is int for t in v):
                raise InputError(f"{where(i)}: input_ids is {type(v).__name__}, not a list of token ids; "
                                 "store one list of integers per record")
            n = len(v)
        else:
            text = v.strip() if isinstance(v, str) else None
            if type(v) is int:
                n = v
            elif text and text.lstrip("+").isdigit() and len(text) <= len(str(MAX_LENGTH)):
                n = int(text)
            else:
                raise InputError(f"{where(i)}: the length {str(v)[:40]!r} is not a whole number; lengths must "
                                 "be whole numbers >= 1: fix or drop that record")
        if n < 1 or n > MAX_LENGTH:
            raise InputError(f"{where(i)}: the length {n:,} is outside 1..{MAX_LENGTH:,}; fix or drop that record")
        out[i] = n
    return out
