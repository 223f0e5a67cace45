"""Helpers shared by several test modules (no test module imports another)."""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from benchmarks._server import (  # noqa: F401  (one home for the server: the tests and the class benchmark)
    CHROMIUM,
    SERVER_START_S,
    StreamlitServer,
    chromium_path,
    free_port,
    run_finished,
    start_streamlit,
)
from benchmarks._server import healthy as _healthy  # noqa: F401  (an older name the conftest imports)

CHAT_TOPICS = ("the tides", "a prime number", "photosynthesis", "a haiku", "the Roman calendar", "binary search")


def write_your_data(folder: Path) -> dict[str, Path]:
    """A new user's three corpora: chat JSONL, prompt/completion Parquet, and a folder of text shards.

    Seeded by construction (no randomness), small enough for a browser test with the real tokenizer.
    """
    folder.mkdir(parents=True, exist_ok=True)
    chats = folder / "chats.jsonl"
    with open(chats, "w", encoding="utf-8") as f:
        for i in range(48):
            topic = CHAT_TOPICS[i % len(CHAT_TOPICS)]
            turns = [{"role": "user", "content": f"Explain {topic} in {1 + i % 4} sentences."},
                     {"role": "assistant", "content": " ".join([f"Here is point {k} about {topic}." for k in range(1 + i % 9)])}]
            if i % 3 == 0:
                turns = [{"role": "system", "content": "Be brief."}, *turns,
                         {"role": "user", "content": "And one more?"}, {"role": "assistant", "content": "One more: yes."}]
            f.write(json.dumps({"messages": turns}) + "\n")
    pairs = folder / "pairs.parquet"
    pq.write_table(pa.table({
        "prompt": [f"Question {i}: how many legs do {i % 7 + 1} spiders have? " + "Think. " * (i % 11) for i in range(120)],
        "completion": [f"{8 * (i % 7 + 1)} legs." + " Each spider has eight." * (i % 5) for i in range(120)],
    }), pairs)
    shards = folder / "shards"
    shards.mkdir(exist_ok=True)
    for k in range(3):
        pq.write_table(pa.table({"text": [f"Shard {k}, document {i}. " + "Packing fills rows. " * ((7 * i + k) % 40)
                                          for i in range(150)]}), shards / f"part-{k}.parquet")
    return {"chats": chats, "pairs": pairs, "shards": shards}


ROOT = Path(__file__).resolve().parents[1]   # the repository


ARTIFACTS = ROOT / "artifacts"


SCRIPT_RUN_MS = 120_000   # one rerun may load a model the first time


VIEWPORT = {"width": 1400, "height": 1000}


def under_ci() -> bool:
    """CI sets ``CI=true``: there, everything the project requires must be present."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> None:
    """Skip a test whose requirement is missing, with ``reason`` (the install step).

    On a developer's machine that is a skip listed by ``-ra``. Under CI the project's
    requirements (the real model, GSM8K, fortunes, Chromium) must be installed by
    ``.ci/run``, so a missing one fails the test instead of hiding behind a skip.
    """
    if under_ci():
        pytest.fail(f"required in CI but missing: {reason}", pytrace=False)
    pytest.skip(reason)


def tiny_llama(vocab_size: int = 64, max_positions: int = 64, attn_implementation: str | None = None):
    """A real transformers LlamaForCausalLM, two layers, random init with seed 0 (for speed), in eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions)
    if attn_implementation is not None:
        cfg._attn_implementation = attn_implementation
    return LlamaForCausalLM(cfg).eval()


def save_tiny_llama(folder: Path, vocab_size: int, max_positions: int) -> Path:
    """:func:`tiny_llama` saved as safetensors in ``folder``."""
    tiny_llama(vocab_size, max_positions).save_pretrained(folder, safe_serialization=True)
    return folder


def cli_said(main, *argv) -> str:
    """What a command line (``main``: the library's or the lab's) prints, stdout and stderr together; --help too."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):   # --help prints and exits
        main(list(argv), out=out, err=out)
    return out.getvalue()


CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} </s> {% endfor %}"
                 "{% if add_generation_prompt %}<assistant> {% endif %}")


def save_word_tokenizer(folder: Path, size: int, template: str = CHAT_TEMPLATE) -> Path:
    """A real tokenizers/transformers fast tokenizer folder: a WordLevel vocabulary of ``size`` words, a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[UNK]", "</s>", "<user>", "<assistant>", "<system>", "hi", "hello", "world", "a", "b"]
    vocab = {w: i for i, w in enumerate(words + [f"w{i}" for i in range(size - len(words))])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="</s>")
    fast.chat_template = template
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    return folder


def browser_skip_reason() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "browser tests skipped: playwright not installed; pip install -r requirements-dev.txt"
    if chromium_path() is None:
        return f"browser tests skipped: {CHROMIUM} not found; apt-get install -y chromium"
    return None


def wait_for_app_run(page, timeout_ms: int = SCRIPT_RUN_MS) -> None:
    """Block until the app is connected and its script has finished running.

    ``stApp`` carries ``data-test-script-state`` (initial -> running -> notRunning) on
    every run, as in Streamlit's own e2e suite; the short first wait lets the last deltas render.
    """
    page.wait_for_timeout(250)
    page.locator("[data-testid='stApp'][data-test-connection-state='CONNECTED']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stSkeleton']").first.wait_for(state="detached", timeout=timeout_ms)


@dataclass
class AppPage:
    """A Playwright page on the running app, with the waits and checks every test needs."""

    page: object
    server: StreamlitServer
    shots: Path
    dialogs: list[str] = field(default_factory=list)
    js_errors: list[str] = field(default_factory=list)
    log_start: int = 0
    ws: object = None  # the page's current websocket to the server

    def __post_init__(self):
        self.log_start = self.server.log_path.stat().st_size  # judge only what this test causes
        self.page.on("websocket", lambda ws: setattr(self, "ws", ws))

    @property
    def base_url(self) -> str:
        return self.server.url

    def open(self, path: str = "") -> AppPage:
        self.page.goto(f"{self.base_url}/{path.lstrip('/')}", wait_until="domcontentloaded")
        self.page.locator("[data-testid='stAppViewContainer']").wait_for(state="attached", timeout=60_000)
        self.wait()
        return self

    def wait(self) -> None:
        wait_for_app_run(self.page)

    @property
    def main(self):
        return self.page.locator("[data-testid='stMain']")

    def text(self) -> str:
        """The visible text of the main area (the sidebar excluded)."""
        return self.main.inner_text()

    def exceptions(self) -> list[str]:
        return [e.inner_text() for e in self.page.locator("[data-testid='stException']").all()]

    def new_server_log(self) -> str:
        with open(self.server.log_path, "rb") as f:
            f.seek(self.log_start)
            return f.read().decode(errors="replace")

    def assert_healthy(self) -> None:
        """No exception box, no dialog, no JavaScript error, no traceback in the server log."""
        assert self.exceptions() == [], f"the app shows an exception: {self.exceptions()[0][:2000]}"
        assert self.dialogs == [], f"a dialog fired: {self.dialogs}"
        assert self.js_errors == [], f"JavaScript error on the page: {self.js_errors}"
        log = self.new_server_log()
        assert "Traceback" not in log, f"the server logged a traceback:\n{log[-3000:]}"

    def metric(self, label: str) -> str:
        """The value shown by the ``st.metric`` whose label starts with ``label``."""
        box = self.page.locator("[data-testid='stMetric']").filter(
            has=self.page.locator("[data-testid='stMetricLabel']", has_text=re.compile("^" + re.escape(label))))
        return box.first.locator("[data-testid='stMetricValue']").inner_text()

    def alerts(self, kind: str = "error") -> list[str]:
        """Texts of the ``st.error`` (or warning / info / success) boxes in the main area."""
        return [a.inner_text() for a in self.main.locator(f"[data-testid='stAlertContent{kind.title()}']").all()]

    def screenshot(self, name: str) -> Path:
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
        # Streamlit scrolls inside its main container, not the document, so full_page alone
        # captures one screen: grow the viewport to the content for the shot instead.
        height = self.page.evaluate("""() => Math.max(document.body.scrollHeight,
            ...[...document.querySelectorAll("[data-testid='stMain'], [data-testid='stAppViewContainer']")]
                .map(e => e.scrollHeight))""")
        size = self.page.viewport_size
        self.page.set_viewport_size({"width": size["width"], "height": min(max(height, size["height"]), 12_000)})
        self.page.wait_for_timeout(300)  # let the charts re-layout to the new size
        self.page.screenshot(path=str(path), full_page=True)
        self.page.set_viewport_size(size)
        return path

    # --- widgets, found by their accessible name (the label); each waits for its rerun
    @contextmanager
    def rerun(self, timeout_ms: int = SCRIPT_RUN_MS):
        """Wait, after the block, for the end of a script run that the block caused."""
        with self.ws.expect_event("framereceived", predicate=run_finished, timeout=timeout_ms):
            yield
        self.wait()

    def control(self, role: str, label: str):
        """The widget with ARIA ``role`` whose label starts with ``label``."""
        return self.page.get_by_role(role, name=re.compile("^" + re.escape(label))).first

    def step(self, name: str) -> None:
        """Open the page's step ``name`` (a tab labelled "2 · name"). Plain tabs cost no rerun: the click
        only mounts that step's panel, so wait until the tab is selected and its figures are laid out."""
        tab = self.page.get_by_role("tab", name=re.compile(r"^\d+ · " + re.escape(name) + "$"))
        tab.click()
        self.page.locator("[role='tab'][aria-selected='true']", has_text=name).wait_for(state="attached")
        self.page.wait_for_timeout(300)

    def click(self, label: str) -> None:
        with self.rerun():
            self.page.get_by_role("button", name=label, exact=True).click()

    def select(self, label: str, option: str) -> None:
        """Pick ``option``: typed into the box first, as the list only renders the options in view."""
        self.control("combobox", label).click()
        self.page.keyboard.type(option)
        with self.rerun():
            self.page.get_by_role("option", name=option, exact=True).click()

    def toggle(self, label: str) -> None:
        """Flip a checkbox or toggle (a toggle is a switch-styled checkbox)."""
        box = self.page.locator("[data-testid='stCheckbox'], [data-testid='stToggle']").filter(
            has=self.page.get_by_text(label, exact=False)).first
        with self.rerun():
            box.locator("label").first.click()

    def radio(self, label: str, option: str) -> None:
        with self.rerun():
            self.control("radiogroup", label).get_by_text(option, exact=True).click()

    def slider_keys(self, label: str, *keys: str) -> None:
        """Move a slider with the keyboard (Home, End, ArrowRight, ...): exact and layout-free."""
        thumb = self.control("slider", label)
        thumb.focus()
        with self.rerun():
            for key in keys:
                thumb.press(key)

    def slider_value(self, label: str) -> str:
        return self.control("slider", label).get_attribute("aria-valuetext")

    def fill(self, label: str, text: str) -> None:
        """Type into a text input or text area and commit it (Ctrl+Enter), as a user does."""
        box = self.control("textbox", label)
        box.fill(text)
        with self.rerun():
            box.press("Control+Enter")

    def unfold(self, inside, title: str | None = None) -> None:
        """Open the expander that holds the element ``inside`` (a locator), if it is folded, and let it settle:
        a click during the opening animation is lost. Name the expander by ``title`` when a folded expander
        does not render ``inside`` at all (a select box)."""
        if inside.is_visible():
            return
        expanders = self.page.get_by_test_id("stExpander")
        expander = expanders.filter(has_text=title) if title else expanders.filter(has=inside)
        expander.first.locator("summary").click()
        inside.wait_for(state="visible")
        self.page.wait_for_timeout(500)

    def upload(self, files, timeout_ms: int = SCRIPT_RUN_MS) -> None:
        """Give the page's file uploader ``files``: a path, or ``{"name", "mimeType", "buffer"}``.

        An uploader folded in an expander (the Dataset explorer's) is unfolded first, as a user would.
        """
        self.unfold(self.page.get_by_test_id("stFileUploader").first)
        with self.rerun(timeout_ms):
            self.page.get_by_test_id("stFileUploader").first.locator("input[type='file']").set_input_files(files)


TIMEOUT = 90  # the first run imports torch (and, on the leakage page, transformers)


def open_page(name: str, timeout: float = TIMEOUT, **state) -> AppTest:
    """The page ``name`` through ``app.py`` (router and sidebar), with ``state`` set in the session first."""
    at = AppTest.from_file("../app.py", default_timeout=timeout)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(f"app_pages/{name}.py").run()
    assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    """No traceback and no error box: what a user sees after a sound interaction."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


FINDING_CARD = re.compile(r"\(`(\w+)`, (error|warning|note)\)")


def findings_shown(at: AppTest) -> dict[str, str]:
    """The findings a page shows as cards (``app_pages._findings``): name -> the colour of its box."""
    shown = {}
    for kind in ("error", "warning", "info"):
        for box in getattr(at, kind):
            for name, _ in FINDING_CARD.findall(box.value):
                shown[name] = kind
    return shown


def no_exception(at: AppTest) -> None:
    """No traceback: what a page with an error finding on show (a red box, on purpose) must still hold to."""
    assert not at.exception, [e.value for e in at.exception]


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def percent(text: str) -> float:
    return float(re.search(r"([\d.]+)%", text).group(1)) / 100


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def page_text(at: AppTest) -> str:
    """Every sentence a page shows: its markdown, captions and boxes (success, info, warning, error), unescaped."""
    said = [m.value for m in at.markdown] + [c.value for c in at.caption]
    said += [x.value for x in [*at.success, *at.info, *at.warning, *at.error]]
    return "\n".join(said).replace("\\", "")


def errors(at: AppTest) -> str:
    return " ".join(e.value for e in at.error).replace("\\", "")


@dataclass(frozen=True)
class Measured:
    """What a CLI process did: exit code, its output, its peak memory and its wall time."""

    rc: int
    stdout: str
    stderr: str
    peak_mib: float
    seconds: float


# Linux counts a process's memory before exec in its peak RSS, so a child forked from this
# (large) pytest process would report at least our size. A tiny launcher, started with
# -I -S, forks and execs the real child and reads its own peak with os.wait4.
LAUNCHER = ("import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.execv(sys.argv[2], sys.argv[2:])\n"
            "_, status, usage = os.wait4(pid, 0)\n"
            "open(sys.argv[1], 'w').write(f'{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}')\n")


# ---------------------------------------------------------------- the hostile-input catalogues: a process tree, measured
HOSTILE_LIMIT_MIB = 1024   # the contract: a CLI process tree (scan workers included) stays within 1 GiB
# the packing_core under test: this checkout, or (to measure a catalogue "before") another one
UNDER_TEST = Path(os.environ.get("PACKING_LAB_UNDER_TEST") or ROOT)
HOSTILE_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": str(UNDER_TEST), "TOKENIZERS_PARALLELISM": "false"}
# a library call held to the CLI's contract: an InputError is one "error:" line and exit 2, anything else a traceback
LIBRARY_CALL = ("import sys\n"
                "from packing_core._validate import InputError\n"
                "try:\n"
                "    exec(compile(sys.argv[1], '<case>', 'exec'), {'__name__': '__case__'})\n"
                "except InputError as e:\n"
                "    sys.stderr.write('error: ' + ' '.join(str(e).split()) + '\\n')\n"
                "    sys.exit(2)\n")


def tree_rss(proc) -> int:
    """Resident bytes of ``proc`` (a psutil.Process) and all its descendants, now."""
    import psutil

    total = 0
    try:
        family = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in family:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_tree(command: list[str], cwd: Path, timeout: float, env: dict | None = None,
             file_size: int | None = None) -> Measured:
    """``command`` in ``cwd``: exit code, output, the peak RSS of its whole process tree, seconds.

    A psutil sampler follows the tree every 20 ms; the child's own peak comes from ``wait4``
    (through ``LAUNCHER``). A hang is killed at ``timeout`` with its process group (exit -9).
    ``file_size`` caps the bytes any file of the tree may grow to (``RLIMIT_FSIZE``): writes past
    it fail with ``EFBIG``, a disk that fills up, without a test hook in the code under test.
    """
    import signal
    import subprocess
    import sys
    import tempfile
    import threading
    import time

    import psutil

    def limit():
        os.setsid()
        if file_size is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    with tempfile.TemporaryDirectory() as tmp:
        out, err, usage = (Path(tmp) / n for n in ("out", "err", "usage"))
        start = time.perf_counter()
        with open(out, "wb") as o, open(err, "wb") as e:
            launcher = subprocess.Popen([sys.executable, "-I", "-S", "-c", LAUNCHER, str(usage), *command],
                                        cwd=cwd, env={**HOSTILE_ENV, **(env or {})}, stdout=o, stderr=e,
                                        stdin=subprocess.DEVNULL, preexec_fn=limit)
            peak, done = [0], threading.Event()

            def sample():
                proc = psutil.Process(launcher.pid)
                while not done.is_set():
                    peak[0] = max(peak[0], tree_rss(proc))
                    done.wait(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                launcher.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.pid, signal.SIGKILL)   # the launcher, the CLI and its workers: a hang
                launcher.wait()
            done.set()
            sampler.join()
        seconds = time.perf_counter() - start
        rc, child_kib = map(int, usage.read_text().split()) if usage.exists() and usage.read_text() else (-9, 0)
        # the sampler also counts the launcher (about 10 MiB); the child's own peak from wait4
        peak_mib = max(peak[0] / 2**20, child_kib / 1024)
        return Measured(rc, out.read_text(errors="replace"), err.read_text(errors="replace"), peak_mib, seconds)


@dataclass(frozen=True)
class Outcome:
    """One case of a hostile catalogue run: its measured process (None when skipped), its folder, and the
    digests of the files it must leave as they were."""

    result: Measured | None
    folder: Path
    before: dict
    skipped: str | None = None


def run_cli_tree(argv: list[str], cwd: Path, timeout: float, env: dict | None = None,
                 file_size: int | None = None) -> Measured:
    """``packing-lab *argv`` (``python -m packing_lab``: every command, the library's and the lab's), or with
    ``argv = ["-c", code]`` a library call under ``LIBRARY_CALL``."""
    import sys

    command = ([sys.executable, "-c", LIBRARY_CALL, argv[1]] if argv[:1] == ["-c"]
               else [sys.executable, "-m", "packing_lab", *argv])
    return run_tree(command, cwd, timeout, env, file_size)


# ---------------------------------------------------------------- the hostile catalogues' one-error-line contract
# what may come before the one error line: a scan's progress, SmolLM2's first-use conversion note
HOSTILE_PROGRESS = re.compile(r"scan: \d+/\d+ shards, [\d,]+ documents, [\d.,]+ documents/s, ETA [\d,?]+( s)?$"
                              r"|SmolLM2: converting the GGUF file on first use \(about \d+ s on \d+ cores\)\.\.\.$")
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e]")


def assert_one_error_line(r, pattern: str, *, stdout_ok: bool = False):
    """Bad input's contract on a finished CLI process ``r``: exit 2, nothing on stdout (unless ``stdout_ok``),
    progress lines at most, then exactly one ``error:`` line that matches ``pattern``, is short, holds no raw
    control character and names no temporary file."""
    assert r.rc == 2, (r.rc, r.stderr[-1000:])
    assert stdout_ok or r.stdout == "", r.stdout[:500]
    lines = [x for x in r.stderr.split("\n")[:-1] if not HOSTILE_PROGRESS.match(x)]
    assert r.stderr.endswith("\n") and len(lines) == 1, repr(r.stderr[-1500:])
    line = lines[0]
    assert line.startswith("error: ") and len(line) < 700, line[:800]
    assert not RAW_CONTROL.search(line), f"raw control characters: {line!r}"
    assert ".part" not in line and "/tmp/tmp" not in line, f"a temporary name: {line!r}"
    assert re.search(pattern, line), f"{line!r} does not match {pattern!r}"
    return r


# ---------------------------------------------------------------- the length readers' tests (tests/data)
TEXTS = ["hello world", "héllo wörld, ça va?", "日本語のテキスト", "a", "tabs\tand, commas"]


def whitespace_tokenizer(texts: list[str]) -> list[list[int]]:
    """A second, real tokenizer: one id per whitespace-separated word."""
    return [[hash(w) % 1000 for w in t.split()] for t in texts]


def small_blocks(monkeypatch, n: int) -> None:
    """Read every format in blocks of about ``n`` bytes (the one setting every reader uses)."""
    import packing_core.data.sources._base as sources_base

    monkeypatch.setattr(sources_base, "BATCH_BYTES", n)


def write(tmp_path, name: str, content: str | bytes):
    """``content`` (text as UTF-8) written to ``tmp_path / name``; its path."""
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def python_lines(fn, *args, **kwargs) -> tuple[object, int]:
    """``(fn(*args, **kwargs), the lines of Python it executed)``: a path check, not a clock.

    A vectorised function runs a few hundred lines of Python however large its input (numpy does
    the rest in C); one that loops in Python over n items runs at least n. The count does not
    change with the machine's load, a time does. ``fn`` runs once untraced first: what a first call
    pays once (an import, a regular expression compiled) is not what the input costs.
    """
    import sys

    fn(*args, **kwargs)
    lines = 0

    def trace(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
        return trace

    sys.settrace(trace)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(None)
    return result, lines
