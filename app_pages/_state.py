"""A page's settings: declared once with their defaults, kept in ``st.session_state``, and what a link may set.

Settings live under plain ``st.session_state`` keys: the setting's name for a shared one
(``context``, ``dataset``), ``page.setting`` for a page's. A widget gets its own key
(``w_<key>``) and copies its value back on change, so a setting survives pages that do not draw
its widget (Streamlit clears widget keys there). A declaration says what a link may set
(``choice``, ``number``, ``text``), so a bad link opens the default view with one line naming what
was ignored.
"""
from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

import packing_core as pc
from app_pages import _content
from packing_core.data import list_sources

log = logging.getLogger("packing_lab")

CONTEXTS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
DEFAULT_CONTEXT = pc.DEFAULT_CONTEXT      # the lab's one default context, shared with the CLI
DEFAULT_DATASET = "support-tickets"
UPLOAD = "uploaded file"






# ---------------------------------------------------------------- state
SETTING, LESSON = "w_", "v_"   # a widget's key prefix: a setting (hidden by controls=hidden), or the lesson's own


def _copy(key: str, prefix: str = SETTING) -> None:
    st.session_state[key] = st.session_state[prefix + key]


def bind(key: str, default, lesson: bool = False):
    """Widget kwargs bound to the plain session key ``key``; the plain key wins at creation.

    ``st.slider("x", 0, 9, **bind("x", 3))``: no ``value=`` argument, the state holds it. A ``lesson`` widget
    (a prediction, the packer the class compares) stays on the teacher's focused screen (``controls=hidden``),
    which hides the others.
    """
    ss = st.session_state
    if key not in ss:
        ss[key] = default
    prefix = LESSON if lesson else SETTING
    wkey = prefix + key
    written = ss.setdefault("_bound", {})  # what bind last put into each widget
    if wkey in ss and key in written and ss[wkey] != written[key]:
        ss[key] = ss[wkey]      # the user moved the widget (even if no callback ran)
    elif wkey not in ss or ss[wkey] != ss[key]:
        ss[wkey] = ss[key]      # first visit, a page that cleared the widget, or a programmatic change
    written[key] = ss[key]
    return {"key": wkey, "on_change": _copy, "args": (key, prefix)}


def setting(key: str, default):
    """The current value of a setting, initialising it if no page has set it yet."""
    return st.session_state.setdefault(key, default)


# ---------------------------------------------------------------- declared settings, and what a link may set
MAX_LINK_CHARS = 2_000      # one value of a link: a page's longest text (the Leakage lab's texts) fits
STEP, CONTROLS = "step", "controls"   # the view's own parameters beside the settings
HIDDEN = "hidden"           # controls=hidden: the teacher's focused screen (no sidebar, no widgets)


@dataclass(frozen=True)
class Setting:
    """One declared setting: its default, and what a link may set it to.

    A plain default declares its type (``width=64``: a whole number, ``skip=False``: on or off);
    ``choice`` names the allowed values, ``number`` a range, ``text`` a check; ``link=False``
    keeps a setting out of links (state a button sets, such as "show the continuation").

    >>> choice(64, (32, 64)).parse("32"), number(0, 0, 999).parse("7"), Setting(False).parse("1")
    (32, 7, True)
    >>> choice(None, (910, 4096)).parse("4096")     # no default (a prediction not made yet): one of the options
    4096
    >>> choice(64, (32, 64)).parse("65")
    Traceback (most recent call last):
    ...
    ValueError: not one of 32, 64
    """

    default: object
    options: tuple | Callable[[], tuple] | None = None   # the allowed values, or a function giving them now
    low: float | None = None            # a number's range, inclusive
    high: float | None = None
    check: Callable[[str], object] | None = None    # text: raises ValueError when the page could not use it
    link: bool = True

    def allowed(self) -> tuple | None:
        return self.options() if callable(self.options) else self.options

    def parse(self, raw: str):
        """The value a link's ``raw`` text means, or ``ValueError`` saying why the page cannot use it."""
        if len(raw) > MAX_LINK_CHARS:
            raise ValueError(f"longer than {MAX_LINK_CHARS:,} characters")
        if any(ord(c) < 32 and c not in "\n\t" for c in raw):
            raise ValueError("holds control characters")
        kind = int if self.default is None and self.low is not None else type(self.default)   # none yet, or a number
        if self.default is None and self.allowed() is not None:   # the option whose text the link holds
            value = next((o for o in self.allowed() if self.text(o) == raw), raw)
        elif kind is bool:
            words = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}
            if raw.strip().lower() not in words:
                raise ValueError("not on or off (1 or 0)")
            value = words[raw.strip().lower()]
        elif kind is int:
            if not re.fullmatch(r"-?\d{1,12}", raw.strip()):
                raise ValueError("not a whole number")
            value = int(raw)
        elif kind is float:
            value = float(raw)   # ValueError on junk
            if not math.isfinite(value):
                raise ValueError("not a finite number")
        else:
            value = raw
        if self.low is not None and value < self.low or self.high is not None and value > self.high:
            raise ValueError(f"outside {self.low:g} to {self.high:g}")
        options = self.allowed()
        if options is not None and value not in options:
            shown = ", ".join(repr(o) if isinstance(o, str) else str(o) for o in options[:8]) + (
                ", ..." if len(options) > 8 else "")
            raise ValueError(f"not one of {shown}")
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as e:   # a check may quote what it read: the note names the setting, never echoes it
                said = str(e)
                for quoted in (repr(raw), f"'{raw}'", f'"{raw}"'):
                    said = said.replace(quoted, "the link's text")
                raise ValueError(said) from None
        return value

    def text(self, value) -> str:
        """``value`` as a link writes it: ``Setting(False).text(True) == "1"``."""
        return ("1" if value else "0") if isinstance(value, bool) else str(value)


def choice(default, options) -> Setting:
    """A setting picked from ``options`` (a tuple, or a function that gives them on this server)."""
    return Setting(default, options=options if callable(options) else tuple(options))


def number(default, low, high) -> Setting:
    return Setting(default, low=low, high=high)


def text(default: str, check: Callable[[str], object]) -> Setting:
    """Free text, read by ``check`` (which raises ``ValueError``, e.g. ``InputError``, on text the page cannot use)."""
    return Setting(default, check=check)


def lines(low: int, high: int, chars: int) -> Callable[[str], None]:
    """A check for text of ``low`` to ``high`` non-empty lines of at most ``chars`` characters each."""
    def check(raw: str) -> None:
        kept = [line for line in raw.splitlines() if line.strip()]
        if not low <= len(kept) <= high or max(map(len, kept)) > chars:
            raise ValueError(f"{low} to {high} lines of at most {chars} characters are needed")
    return check


def _param(name: str) -> str:
    """A setting's name in a link: ``break_`` reads ``break``."""
    return name.rstrip("_")


@dataclass(frozen=True)
class PageSettings:
    """A page's settings, declared once with their defaults; session keys are ``page.setting``.

    ``S = page_settings("leakage_lab", mask=choice("on", ("on", "off")))`` then ``st.radio(..., **S.bind("mask"))``;
    the session key is ``"leakage_lab.mask"``, its widget's ``"w_leakage_lab.mask"``, its link parameter ``mask``.
    """

    page: str         # "" for the shared settings of the sidebar: their keys are the setting's name
    settings: dict = field(default_factory=dict)    # name -> Setting

    @property
    def defaults(self) -> dict:
        return {name: s.default for name, s in self.settings.items()}

    def key(self, name: str) -> str:
        return f"{self.page}.{name}" if self.page else name

    def bind(self, name: str, lesson: bool = False) -> dict:
        return bind(self.key(name), self.settings[name].default, lesson)

    def get(self, name: str):
        return setting(self.key(name), self.settings[name].default)

    def keep_within(self, name: str, options, default) -> None:
        """Put a setting back on ``default`` when ``options`` no longer hold it (another model, a scenario)."""
        if st.session_state.get(self.key(name), default) not in options:
            st.session_state[self.key(name)] = default

    def answer_to(self, name: str, question) -> None:
        """A prediction ``name`` holds for the ``question`` it answered: another question (the Leakage lab's switches
        changed) clears it. A link's prediction answers the question the link opens, so the link opens answered."""
        ss, asked = st.session_state, self.key(name) + "_question"
        if self.from_link() or asked not in ss:
            ss[asked] = question
        elif ss[asked] != question:
            ss[self.key(name)], ss[asked] = None, question

    def from_link(self) -> bool:
        """Did a link set this page's view on this run? (A page whose settings depend on each other
        keeps the link's values instead of deriving them: the Leakage lab's scenario.)"""
        return st.session_state.get("_link_page") == self.page

    def apply_link(self) -> None:
        """Put the values of an opening link into the session (each checked against its declaration)."""
        link, used, notes = _link()
        for name, declared in self.settings.items():
            param = _param(name)
            if not declared.link or param not in link:
                continue
            used.add(param)
            try:
                st.session_state[self.key(name)] = declared.parse(link[param])
            except (ValueError, TypeError) as e:
                notes.append(f"{param} ({e})")
        if self.page:
            spec = _content.page(self.page)
            if STEP in link and spec.steps:
                used.add(STEP)
                try:
                    n = choice(1, range(1, len(spec.steps) + 1)).parse(link[STEP])
                    st.session_state[_step_key(self.page)] = step_label(n, spec.steps[n - 1])
                except ValueError as e:
                    notes.append(f"{STEP} ({e})")
            if link:
                st.session_state["_link_page"] = self.page

    def link_values(self) -> dict[str, str]:
        """The settings a link must carry to restore this view: those that differ from their defaults."""
        ss = st.session_state
        return {_param(name): s.text(ss[self.key(name)]) for name, s in self.settings.items()
                if s.link and self.key(name) in ss and ss[self.key(name)] != s.default}


_DECLARED: dict[str, PageSettings] = {}    # page -> its declaration (the same for every session)


def page_settings(page: str, **declared) -> PageSettings:
    """Declare a page's settings (plain defaults, or ``choice`` / ``number`` / ``text``), and put the values of a
    link that opens this page into the session: call it once, at the top of the page. A text or a number a link
    may set is declared with ``choice``, ``number`` or ``text`` (a plain ``"bfd"`` or ``64`` is refused here: a
    link could put any text, or any 12-digit number, into its widget)."""
    settings = PageSettings(page, {k: v if isinstance(v, Setting) else Setting(v) for k, v in declared.items()})
    unchecked = [n for n, s in settings.settings.items() if s.link and isinstance(s.default, str)
                 and s.options is None and s.check is None]
    if unchecked:   # a link would put any text into the session (and into a widget, or a line of the page)
        raise KeyError(f"{page}: declare {unchecked} with choice() or text(): a link may set them")
    unbounded = [n for n, s in settings.settings.items() if s.link and type(s.default) in (int, float)
                 and s.options is None and (s.low is None or s.high is None)]
    if unbounded:
        raise KeyError(f"{page}: declare {unbounded} with number() or choice(): a link may set them")
    clash = {_param(n) for n in settings.settings} & ({_param(n) for n in SHARED.settings} | {STEP, CONTROLS})
    if clash:
        raise KeyError(f"{page}: {sorted(clash)} are names of the shared view; give the page's setting another name")
    _DECLARED[page] = settings
    settings.apply_link()
    return settings




def _link() -> tuple[dict, set, list]:
    """(the link's parameters, the names read so far, notes on what was ignored) of this run."""
    ss = st.session_state
    return ss.setdefault("_link", {}), ss.setdefault("_link_used", set()), ss.setdefault("_link_notes", [])


def _step_key(page: str) -> str:
    return f"{page}.step"


def step_number(spec, label: str | None) -> int:
    """The step a tab label names, 1 for none: ``step_number(spec, "2 · Positions") == 2``."""
    labels = [step_label(i, name) for i, name in enumerate(spec.steps, 1)]
    return labels.index(label) + 1 if label in labels else 1


def step_label(number: int, name: str) -> str:
    """A tab's label: ``step_label(2, "Positions") == "2 · Positions"`` (what the teacher says: "step 2")."""
    return f"{number} · {name}"


# ---------------------------------------------------------------- datasets
@st.cache_resource(show_spinner=False)
def sources() -> dict:
    """name -> SourceInfo for every built-in source (available or not)."""
    return {s.name: s for s in list_sources()}


def dataset_names() -> list[str]:
    names = [n for n, s in sources().items() if s.available]
    if "upload" in st.session_state:
        names.append(UPLOAD)
    return names


# the sidebar's settings, read by every page: SHARED.get("context")
SHARED = PageSettings("", {"context": choice(DEFAULT_CONTEXT, CONTEXTS),
                           "dataset": choice(DEFAULT_DATASET, lambda: tuple(dataset_names()))})
