"""Hostile links: a URL's query parameters are input from anyone, on a server a whole class shares.

The contract, for every page of ``_content.PAGES``: a bad link opens the default view (no exception, no error
box), one line names what was ignored, and nothing from the URL is ever rendered as markup or HTML. The last
is checked on the raw text the page sends: every markdown body, caption, alert, heading and label, and every
``st.html`` body, must hold no unescaped fragment of the link's markup.

Classes (each on every page): an unknown page name, unknown parameters (names with markup too), out-of-range
values, non-numeric numbers, a 10 kB value, control characters, and four kinds of markup or script in values.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner import RerunData
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import local_script_runner as runner

from app_pages import _content, _state, _text

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 180
PAGE_NAMES = [p.name for p in _content.PAGES]
NOTE = "Part of this link was ignored"

SCRIPT = "<script>alert(1)</script>"
BOLD = "**bold**"
JS_LINK = "[x](javascript:alert(1))"
IMG = "<img src=x onerror=alert(1)>"
# What must never reach a markdown body unescaped (esc() puts a backslash before each special character), and
# what must never reach an st.html body at all: (the fragment, its pattern in markdown).
RAW = (("<script", r"(?<!\\)<script"), ("**bold", r"(?<!\\)\*\*bold"), ("](javascript", r"(?<!\\)\]\(javascript"),
       ("<img", r"(?<!\\)<img"), ("alert(1)", r"alert\(1\)"))


def _declared() -> dict:
    """Each page's declared settings (a page declares them when it runs; a fresh process has not run it yet)."""
    missing = [p for p in _content.PAGES if p.name not in _state._DECLARED]
    for p in missing:
        AppTest.from_file(APP, default_timeout=TIMEOUT).switch_page(p.path).run()
    return {p.name: {**_state.SHARED.settings, **_state._DECLARED[p.name].settings} for p in _content.PAGES}


@pytest.fixture(scope="module")
def declared() -> dict:
    return _declared()


def _numbers(settings: dict) -> dict:
    return {n: s for n, s in settings.items() if s.link and type(s.default) in (int, float)}


def _bad_values(kind: str, settings: dict) -> dict[str, str]:
    """The parameters of a link of class ``kind`` against a page's declared ``settings`` (link names)."""
    linked = {n: s for n, s in settings.items() if s.link}
    if kind == "unknown parameter":
        return {"nonsense": "1", "<b>x</b>": "2", "**x**": "3", "a" * 10_000: "4", "x\n\n# Heading": "5",
                "bell\x07\x1b[2J": "6"}
    if kind == "out of range":
        out = {}
        for n, s in linked.items():
            if s.high is not None:
                out[_state._param(n)] = str(int(s.high) + 1)
            elif s.low is not None:
                out[_state._param(n)] = str(int(s.low) - 1)
            elif s.options is not None:
                out[_state._param(n)] = "no-such-choice"
            elif type(s.default) is int:        # a whole number declared without a range
                out[_state._param(n)] = "-999999999999"
        return {**out, "step": "99"}
    if kind == "non-numeric":
        return {**{_state._param(n): "twelve" for n in _numbers(settings)},
                **{_state._param(n): "yes please" for n, s in linked.items() if type(s.default) is bool},
                "context": "1e309", "step": "nan"}
    if kind == "10 kB value":
        return {**{_state._param(n): "7" * 10_000 for n in linked}, "step": "1" * 10_000}
    if kind == "control characters":
        return {**{_state._param(n): "1\x00\x1b[2J\x07" for n in linked}, "step": "1\x00"}
    if kind == "multi-line markup":     # text a free-text check accepts (lines), every line a payload
        return {**{_state._param(n): MARKUP_LINES for n in linked}, "step": MARKUP_LINES}
    payload = {"script": SCRIPT, "bold": BOLD, "javascript link": JS_LINK, "img onerror": IMG}[kind]
    return {**{_state._param(n): payload for n in linked}, "step": payload, "controls": payload, payload: "1"}


KINDS = ("unknown parameter", "out of range", "non-numeric", "10 kB value", "control characters",
         "script", "bold", "javascript link", "img onerror", "multi-line markup")
MARKUP_LINES = "\n".join(f"{p} is the text of document {i}." for i, p in enumerate((SCRIPT, BOLD, JS_LINK, IMG)))


def opened(page: str, params: dict[str, str], monkeypatch=None, page_name: str | None = None) -> AppTest:
    """A new session opening ``page`` from a link with ``params``; ``page_name``: the URL names that page instead
    (what a browser sends for ``/NAME?...``), for a page that does not exist."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in params.items():
        at.query_params[name] = value
    if page_name is None:
        at.switch_page(f"app_pages/{page}.py")
    else:
        monkeypatch.setattr(runner, "RerunData", lambda **kw: RerunData(**kw, page_name=page_name))
    return at.run()


def _bodies(at: AppTest) -> list[tuple[str, str]]:
    """(kind, raw text) of everything the page sends that the browser renders as markdown or HTML."""
    out: list[tuple[str, str]] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        kind = getattr(node, "type", "")
        if kind == "html":
            out.append(("html", node.proto.body))
        elif proto is not None and kind in ("markdown", "caption", "latex", "info", "warning", "error", "success",
                                            "title", "header", "subheader", "exception"):
            out.append((kind, str(getattr(node, "value", "")) or str(proto)))
        elif proto is not None and kind == "metric":
            out.append((kind, f"{node.label} {node.value}"))
        elif proto is not None:
            for field in ("label", "help", "placeholder", "caption"):     # widget labels, help, expanders, tabs
                value = getattr(proto, field, None)
                if isinstance(value, str) and value:
                    out.append((f"{kind}.{field}", value))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out


def _rendered(at: AppTest, params: dict[str, str]) -> list[str]:
    """Each place where a fragment of the link's markup reaches the page unescaped."""
    sent = " ".join((*params, *params.values()))
    fragments = [(f, pattern) for f, pattern in RAW if f in sent]
    found = []
    for kind, body in _bodies(at):
        for f, pattern in fragments:
            if kind == "html":
                hit = f in body and not (f == "<script" and "alert(1)" not in body)   # the lab's own script is no hit
                where = body.find(f)
            else:
                m = re.search(pattern, body)
                hit, where = m is not None, m.start() if m else -1
            if hit:
                found.append(f"{kind}: ...{body[max(0, where - 80):where + 60]!r}")
    return found


def _controls_in_notes(at: AppTest) -> bool:
    return any(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", i.value) for i in at.info)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("page", PAGE_NAMES)
def test_a_hostile_link_opens_the_default_view_with_one_line_and_renders_nothing(page, kind, declared):
    settings = declared[page]
    params = _bad_values(kind, settings)
    at = opened(page, params)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    lines = [i.value for i in at.info if i.value.startswith(NOTE)]
    assert len(lines) == 1, lines
    assert "\n" not in lines[0].strip() and not _controls_in_notes(at), lines[0][:300]   # one line, no controls
    assert len(lines[0]) < 4_000, len(lines[0])                     # a 10 kB value is not echoed whole
    keys = {n: (n if n in _state.SHARED.settings else f"{page}.{n}") for n in settings}
    for name, s in settings.items():
        if s.link and _state._param(name) in params and keys[name] in at.session_state:
            value = at.session_state[keys[name]]
            if value != s.default:
                # only free text may take a hostile value, and only text its check accepts
                assert s.check is not None and type(s.default) is str, (name, value)
            else:
                assert _text.esc(_state._param(name)[:40]) in lines[0], (name, lines[0][:300])
    assert not _rendered(at, params), _rendered(at, params)


UNKNOWN_PAGES = {
    "a misspelt page": "why_pakcing",
    "markup": SCRIPT,
    "bold": BOLD,
    "javascript link": JS_LINK,
    "img onerror": IMG,
    "10 kB": "p" * 10_000,
    "control characters": "why\x00packing\x1b[2J",
    "a path": "../../etc/passwd",
}


@pytest.mark.parametrize("kind", UNKNOWN_PAGES)
def test_a_link_to_no_page_opens_the_first_page_with_one_line(kind, monkeypatch):
    name = UNKNOWN_PAGES[kind]
    at = opened(PAGE_NAMES[0], {"nonsense": SCRIPT}, monkeypatch, page_name=name)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == _content.PAGES[0].title                  # the first page ran
    lines = [i.value for i in at.info if i.value.startswith(NOTE)]
    assert len(lines) == 1 and "no such page" in lines[0], lines
    assert "\n" not in lines[0].strip() and not _controls_in_notes(at), lines[0]
    assert len(lines[0]) < 1_000, len(lines[0])
    assert not _rendered(at, {name: SCRIPT}), _rendered(at, {name: SCRIPT})


def test_the_markup_check_can_fail():
    """The check finds an unescaped fragment in a markdown body, and passes its escaped form."""
    class Fake:
        def __init__(self, kind, value):
            self.type, self.value, self.proto, self.children = kind, value, object(), {}

    class Tree:
        def __init__(self, *nodes):
            self._tree = Fake("root", "")
            self._tree.proto = None
            self._tree.children = dict(enumerate(nodes))

    params = {"x": SCRIPT + BOLD + JS_LINK}
    assert _rendered(Tree(Fake("markdown", f"a {BOLD} b")), params)
    assert _rendered(Tree(Fake("caption", f"see {JS_LINK}")), params)
    assert not _rendered(Tree(Fake("markdown", _text.esc(SCRIPT + BOLD + JS_LINK))), params)


def test_a_setting_a_link_may_set_is_declared_with_its_choices_range_or_check():
    """A plain text or number default would let a link put any value into the page's widget: refused at declaration
    (before the session is touched), whatever the page."""
    with pytest.raises(KeyError, match=r"\['strategy'\] with choice\(\) or text\(\)"):
        _state.page_settings("nowhere", strategy="bfd")
    with pytest.raises(KeyError, match=r"\['shown'\] with number\(\) or choice\(\)"):
        _state.page_settings("nowhere", shown=0, skip=False)
    assert "nowhere" not in _state._DECLARED
