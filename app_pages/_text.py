"""Safe text on a page, and stopping a page: what every other helper may use."""
from __future__ import annotations

import re
from typing import NoReturn

# ---------------------------------------------------------------- text and errors
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def esc(text) -> str:
    """Markdown-safe text: ``esc("a_b *c*") == r"a\\_b \\*c\\*"``; user text never renders as markup."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


class PageStop(Exception):
    """Raised by :func:`stop`: the page ends here, and the run still ends as every run does (the view written)."""


def stop() -> NoReturn:
    """End the page here. ``st.stop()`` would end the whole run at once: after it even reading the session
    raises, so the URL would keep the view of the run before."""
    raise PageStop
