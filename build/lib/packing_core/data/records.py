"""Supervised records, one at a time: a chat checked and rendered within the lab's limits, and
prompt + completion pairs counted with their completion's tokens.

A chat is a list of ``{role, content}`` messages (``CHAT_ROLES``); a ShareGPT chat's
``{from, value}`` messages are read the same way, with its roles mapped (``SHAREGPT_ROLES``)::

    >>> check_messages([{"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}], "line 1")
    [{'role': 'user', 'content': '2+2?'}, {'role': 'assistant', 'content': '4'}]

A chat is rendered by the tokenizer's own template (``tokenizer.apply_chat_template``) under a
timer and a size bound (:func:`render_chat`); :func:`chat_texts` gives the renderings that a
chat's length and trained tokens come from. :mod:`packing_core.data.chats` counts whole
batches of chats with them. A prompt/completion pair is tokenised as ``prompt + completion``
and the completion's tokens are those past ``len(prompt)``, as TRL does::

    >>> from packing_core.data.lengths import byte_tokenizer
    >>> prompt_completion_lengths(["Q: 2+2? "], ["A: 4"], byte_tokenizer, str)
    (array([12]), array([4]))

The tokenizer is passed in (this layer never imports transformers).
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from packing_core._validate import MAX_TEMPLATE_SECONDS, MAX_TEXT_BYTES, MAX_TURNS, InputError, limit_hint
from packing_core.data.lengths import count_tokens

__all__ = ["CHAT_ROLES", "SHAREGPT_ROLES", "chat_texts", "check_messages", "prompt_completion_lengths", "render_chat"]

CHAT_ROLES = ("system", "user", "assistant", "tool")
SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system"}   # ShareGPT's ``from`` -> role
_ROLE_HELP = ", ".join(CHAT_ROLES) + " (ShareGPT's human, gpt, system are read as user, assistant, system)"


def _text(value, what: str, where: str) -> str:
    if value is None:
        raise InputError(f"{where} has no {what}; fill it in or drop that record")
    if not isinstance(value, str):
        raise InputError(f"{where}: {what} is {type(value).__name__}, not text; store it as a string")
    return value


def message_fields(m: Mapping) -> tuple[object, object]:
    """``(role, content)`` of one message: ``role``/``content``, else ShareGPT's ``from``/``value``."""
    role = m.get("role") if m.get("role") is not None else m.get("from")
    content = m.get("content") if m.get("content") is not None else m.get("value")
    return SHAREGPT_ROLES.get(role, role) if isinstance(role, str) else role, content


def check_messages(messages, where: str) -> list[dict]:
    """One chat as ``[{role, content}]``, or the one line that refuses it (naming the message)."""
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: messages must be a non-empty list of {{role, content}}, got "
                         f"{type(messages).__name__}")
    if len(messages) > MAX_TURNS:   # each answer renders the chat up to it: turns^2 work
        raise InputError(f"{where}: {len(messages):,} messages in one chat, more than the lab renders "
                         f"({MAX_TURNS:,}); split the conversation into shorter samples ({limit_hint('MAX_TURNS')})")
    out = []
    for turn, m in enumerate(messages):
        role, content = message_fields(m) if isinstance(m, Mapping) else (None, None)
        if role is None:
            raise InputError(f"{where}: message {turn} has no role; every message needs a role ({_ROLE_HELP}) "
                             "and a content")
        if role not in CHAT_ROLES:
            raise InputError(f"{where}: message {turn} has an unknown role {role!r}; use one of {_ROLE_HELP}")
        if not isinstance(content, str):
            raise InputError(f"{where}: message {turn} ({role}) has no text content")
        out.append({"role": role, "content": content})
    return out


class _TemplateTimeout(BaseException):   # not Exception: a library's `except Exception` must not swallow it
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
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

    before = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def render_chat(tokenizer, messages: list[dict], where: str, generation: bool = False) -> str:
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
                         "chat (loops nested in the template?); fix the tokenizer's template "
                         f"({limit_hint('MAX_TEMPLATE_SECONDS')})") from None
    except Exception as e:  # noqa: BLE001  (jinja raises anything; one line that names the record)
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise InputError(f"{where}: the chat template failed ({type(e).__name__}: {first}); check the messages "
                         "or the tokenizer's template") from None
    if not isinstance(text, str):
        raise InputError(f"{where}: the chat template returned {type(text).__name__}, not text")
    if len(text) > MAX_TEXT_BYTES:
        raise InputError(f"{where}: the chat template rendered {len(text):,} characters, more than one document "
                         f"may hold ({MAX_TEXT_BYTES:,}); shorten the chat or fix the template ({limit_hint('MAX_TEXT_BYTES')})")
    return text


def chat_texts(tokenizer, messages, where: str) -> tuple[str, list[tuple[str, str]]]:
    """The templated conversation, and (before, after) texts around each assistant turn.

    ``before`` is the chat up to the turn with the generation prompt, ``after`` the chat up to
    and including it: the turn trains ``count(after) - count(before)`` tokens.
    """
    messages = check_messages(messages, where)
    spans = [(render_chat(tokenizer, messages[:i], where, generation=True), render_chat(tokenizer, messages[: i + 1], where))
             for i, m in enumerate(messages) if m["role"] == "assistant"]
    return render_chat(tokenizer, messages, where), spans


def _texts(values, what: str, where: Callable[[int], str]) -> pa.Array:
    """A column of texts as an Arrow string array; the first missing or non-text value refused."""
    arr = values if isinstance(values, pa.Array) else None
    if arr is None:
        try:
            arr = pa.array(list(values), pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arr = None
    if arr is not None and pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
                           or pa.types.is_null(arr.type)):
        items = values.to_pylist() if isinstance(values, pa.Array) else list(values)
        i = next(i for i, v in enumerate(items) if not isinstance(v, str))
        _text(items[i], what, where(i))
    assert arr is not None
    if arr.null_count:
        _text(None, what, where(int(np.argmax(arr.is_null().to_numpy(zero_copy_only=False)))))
    return arr.cast(pa.string())


def prompt_completion_lengths(prompts, completions, tokenizer, where: Callable[[int], str]
                              ) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths, completion tokens)`` of prompt/completion pairs: ``count(prompt + completion)`` and
    that minus ``count(prompt)``, clipped at 0 (a merge across the seam can take a token back)."""
    p, c = _texts(prompts, "prompt", where), _texts(completions, "completion", where)
    full = count_tokens(tokenizer, pc.binary_join_element_wise(p, c, "").to_pylist())
    prompt = count_tokens(tokenizer, p.to_pylist())
    return full, np.maximum(full - prompt, 0)
