"""Chat records: turns bounded, and a template that never ends is stopped, in any thread."""
from __future__ import annotations

import threading
import time

import pytest

from packing_core._validate import MAX_TEMPLATE_SECONDS, MAX_TURNS
from packing_core.data.records import chat_texts


class EndlessTemplate:
    """A tokenizer whose template loops for ever in Python (as jinja's compiled nested loops do)."""

    chat_template = "{% for i in range(10**9) %}{% for j in range(10**9) %}x{% endfor %}{% endfor %}"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        out = 0
        while True:
            out += 1


def _chat(turns: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(turns)]


def _stopped_in(run) -> tuple[BaseException | None, float]:
    start = time.monotonic()
    try:
        run()
    except BaseException as e:  # noqa: BLE001
        return e, time.monotonic() - start
    return None, time.monotonic() - start


_MAIN_THREAD = """
import time
from packing_core.data.records import chat_texts
class Endless:
    chat_template = "loops"
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        while True:
            pass
start = time.monotonic()
try:
    chat_texts(Endless(), [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}], "line 1")
except ValueError as e:
    print(round(time.monotonic() - start, 1), e)
"""


def test_an_endless_template_is_stopped_in_the_main_thread():
    """In its own process (the signal timer needs the main thread; a broken one would hang pytest)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _MAIN_THREAD], capture_output=True, text=True,
                       timeout=MAX_TEMPLATE_SECONDS + 60)
    seconds, _, message = r.stdout.partition(" ")
    assert "took more than" in message, (r.stdout, r.stderr[-500:])
    assert float(seconds) < MAX_TEMPLATE_SECONDS + 3


def test_an_endless_template_is_stopped_in_a_server_thread():
    """The app renders in its script thread, where no signal arrives: the trace budget stops it."""
    box = {}
    thread = threading.Thread(target=lambda: box.update(r=_stopped_in(
        lambda: chat_texts(EndlessTemplate(), _chat(2), "line 1"))), daemon=True)
    thread.start()
    thread.join(MAX_TEMPLATE_SECONDS + 10)
    assert not thread.is_alive(), "the rendering was never stopped"
    error, seconds = box["r"]
    assert isinstance(error, ValueError) and "took more than" in str(error), error
    assert seconds < MAX_TEMPLATE_SECONDS + 3


def test_a_chat_longer_than_max_turns_is_refused_before_rendering():
    with pytest.raises(ValueError, match=f"{MAX_TURNS + 1:,} messages in one chat, more than the lab renders"):
        chat_texts(EndlessTemplate(), _chat(MAX_TURNS + 1), "line 1")
