"""A Streamlit session without a browser: the app's own websocket protocol, spoken from Python.

A browser runs the app by exchanging protobuf messages with the server on ``/_stcore/stream``
(streamlit/web/server/starlette/starlette_websocket.py): it sends ``BackMsg`` frames, the
server answers with ``ForwardMsg`` frames. This client sends the same frames the frontend
sends and keeps the same state the frontend keeps, so the server does the same work per
click as for a real student, without a renderer on the machine:

- **Open a page.** A ``rerun_script`` ``ClientState`` with ``page_name`` set to the URL's path
  (what a browser opening ``/leakage_lab`` sends); later pages by the ``page_script_hash`` the
  server lists in its ``navigation`` message (what a click in the sidebar's page list sends),
  in the same session, so the sidebar's settings carry over.
- **The page.** Each ``delta`` puts an element or a block at ``metadata.delta_path``
  (``[root, i, j, ...]``: root 0 is the main area, 1 the sidebar). As in the frontend's
  ``AppRoot.applyDelta``, a new element replaces the node and whatever was under it, a new
  block keeps its children, and when ``script_finished`` arrives the nodes the run did not
  send again are dropped: all of them after a full run, only those of the rerun fragments
  (``metadata.run.fragment_ids``) after a fragment run.
- **Widget state.** As the frontend's ``WidgetStateManager``: a widget's value starts at its
  proto's default, follows the server when the proto says ``set_value`` (a value set from
  ``st.session_state``), and otherwise keeps what the user chose. A click sends a rerun
  carrying every widget's value (``WidgetStates``), a button's ``trigger_value`` only in the
  rerun it causes, and the widget's ``fragment_id`` when it sits in an ``st.fragment``
  (so only the fragment reruns, as in a browser). A selectbox or radio is sent as its
  formatted option (``string_value``: ``SelectboxSerde.serialize`` in
  streamlit/elements/widgets/selectbox.py), a checkbox as ``bool_value``, a number input as
  ``int_value`` or ``double_value`` by its ``data_type``, a select slider as the formatted
  options (``string_array_value``).
- **Waiting.** A click ends at the ``script_finished`` of the run it caused; a run cut short
  by a newer one (``FINISHED_EARLY_FOR_RERUN``) does not count.
- **Progress.** Each run records when its first progress bar or spinner arrived, counted from the
  click (``last_progress_s``), and the texts of its progress bars (``last_progress_texts``): what a
  browser would draw while the student waits.

Not sent: ``cached_message_hashes`` (the frontend lists the messages it holds so the server
can send a reference instead of a repeated large one; without them every message comes in
full, which costs the server slightly more, never less), uploads, and plotly or dataframe
selections. Uses ``websockets``, which Streamlit itself depends on.

    session = ProtocolSession("http://127.0.0.1:8501")
    await session.connect()
    await session.open("leakage_lab")
    await session.checkbox("Skip predictions and always show the result", True)
    session.alerts("success")      # ['Verdict: EQUIVALENT. ...']
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

RUN_TIMEOUT_S = 300.0
ALERT_KINDS = {1: "error", 2: "warning", 3: "info", 4: "success"}   # Alert.Format
WIDGETS = ("checkbox", "radio", "selectbox", "number_input", "text_area", "text_input", "slider", "button")


class ProtocolError(RuntimeError):
    """The page did not hold what a step needs (no such widget or option), or a run never finished."""


@dataclass
class Node:
    """One element or block of the page, as the last run that sent it left it."""

    path: tuple[int, ...]
    block: bool
    type: str          # "markdown", "selectbox", ... for an element; "expandable", "column", ... for a block
    proto: object      # the element's own message (``Element.selectbox``...) or the ``Block``
    run: str           # the script_run_id of the run that sent it
    fragment_id: str   # the st.fragment it belongs to, "" outside any


def _initial_value(kind: str, p) -> tuple[str, object] | None:
    """(WidgetState field, value) a widget's proto gives before the user touches it."""
    if kind == "checkbox":
        return "bool_value", p.value if p.set_value else p.default
    if kind in ("radio", "selectbox"):
        if p.set_value:
            return "string_value", p.raw_value if p.HasField("raw_value") else None
        return "string_value", p.options[p.default] if p.HasField("default") and p.options else None
    if kind == "number_input":
        field = "int_value" if p.data_type == p.INT else "double_value"
        value = p.value if p.set_value and p.HasField("value") else (p.default if p.HasField("default") else None)
        return field, None if value is None else (int(value) if field == "int_value" else float(value))
    if kind in ("text_area", "text_input"):
        return "string_value", p.value if p.set_value and p.HasField("value") else (
            p.default if p.HasField("default") else None)
    if kind == "slider":
        if p.options:   # a select_slider: the formatted options
            return "string_array_value", list(p.raw_value) if p.set_value else [p.options[int(i)] for i in p.default]
        return "double_array_value", list(p.value if p.set_value else p.default)
    return None


class ProtocolSession:
    """One Streamlit session over the websocket protocol (see the module docstring)."""

    def __init__(self, url: str, timeout_s: float = RUN_TIMEOUT_S):
        self.url = url.rstrip("/").replace("http://", "ws://").replace("https://", "wss://") + "/_stcore/stream"
        self.timeout_s = timeout_s
        self.nodes: dict[tuple[int, ...], Node] = {}
        self.values: dict[str, tuple[str, object]] = {}   # widget id -> (WidgetState field, value)
        self.pages: dict[str, str] = {}                    # url_pathname ("" for the default page) -> hash
        self.page_hash = ""
        self.run_id = ""
        self.messages = 0
        self.asset_bytes = 0
        self.last_progress_s: float | None = None   # the last run's first progress bar or spinner, from the click
        self.last_progress_texts: list[str] = []     # the texts of the last run's progress bars
        self._started = 0.0
        self._ws = None

    # ------------------------------------------------------------ connection
    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        # Streamlit reads the first subprotocol as the protocol (the frontend sends "streamlit")
        self._ws = await connect(self.url, subprotocols=["streamlit"], max_size=None, open_timeout=self.timeout_s)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    async def __aenter__(self) -> ProtocolSession:
        await self.connect()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ------------------------------------------------------------ runs
    async def rerun(self, *, page_name: str = "", page_hash: str | None = None, fragment_id: str = "",
                    triggers: tuple[str, ...] = ()) -> float:
        """Send one ``rerun_script`` with every widget's value; wait for its end; return the seconds."""
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = ""
        state.page_script_hash = self.page_hash if page_hash is None else page_hash
        state.page_name = page_name
        state.fragment_id = fragment_id
        for wid, (field, value) in self.values.items():
            if value is None:
                continue
            w = state.widget_states.widgets.add(id=wid)
            if field in ("string_array_value", "double_array_value"):
                getattr(w, field).data.extend(value)
            else:
                setattr(w, field, value)
        for wid in triggers:
            state.widget_states.widgets.add(id=wid, trigger_value=True)
        start = self._started = time.perf_counter()
        self.last_progress_s, self.last_progress_texts = None, []
        await self._ws.send(msg.SerializeToString())
        try:
            await asyncio.wait_for(self._until_finished(), self.timeout_s)
        except TimeoutError as e:
            raise ProtocolError(f"no script_finished within {self.timeout_s:.0f} s") from e
        return time.perf_counter() - start

    async def _until_finished(self) -> None:
        while True:
            msg = ForwardMsg.FromString(await self._ws.recv())
            self.messages += 1
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.run_id = msg.metadata.run.script_run_id
            elif kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
                self.page_hash = msg.navigation.page_script_hash
            elif kind == "delta":
                self._apply(msg.delta, tuple(msg.metadata.delta_path))
            elif kind == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                self._clear_stale(msg.script_finished, set(msg.metadata.run.fragment_ids))
                return

    def _apply(self, delta, path: tuple[int, ...]) -> None:
        which = delta.WhichOneof("type")
        if which == "new_element":
            kind = delta.new_element.WhichOneof("type")
            proto = getattr(delta.new_element, kind)
            for p in [p for p in self.nodes if p[:len(path)] == path and p != path]:
                del self.nodes[p]   # an element in place of a block: its children go
            self.nodes[path] = Node(path, False, kind, proto, self.run_id, delta.fragment_id)
            self._saw(kind, proto)
            if kind in WIDGETS and kind != "button" and proto.id:
                initial = _initial_value(kind, proto)
                if initial is not None and (proto.id not in self.values or getattr(proto, "set_value", False)):
                    self.values[proto.id] = initial
        elif which == "new_transient":   # st.spinner and the caches' spinners: drawn, never kept as a node
            for element in delta.new_transient.elements:
                kind = element.WhichOneof("type")
                self._saw(kind, getattr(element, kind))
        elif which == "add_block":
            block = delta.add_block
            self.nodes[path] = Node(path, True, block.WhichOneof("type") or "", block, self.run_id, delta.fragment_id)

    def _saw(self, kind: str, proto) -> None:
        """Note a progress bar or spinner of this run: when the first came, and every text shown."""
        if kind not in ("progress", "spinner"):
            return
        if self.last_progress_s is None:
            self.last_progress_s = time.perf_counter() - self._started
        if proto.text and proto.text not in self.last_progress_texts:
            self.last_progress_texts.append(proto.text)

    def _clear_stale(self, status: int, fragments: set[str]) -> None:
        if status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
            stale = [p for p, n in self.nodes.items() if n.run != self.run_id and n.fragment_id in fragments]
        else:
            stale = [p for p, n in self.nodes.items() if n.run != self.run_id]
        for p in stale:
            del self.nodes[p]
        if status != ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:   # widgets no longer drawn lose their state
            live = {n.proto.id for n in self.nodes.values() if not n.block and n.type in WIDGETS}
            self.values = {k: v for k, v in self.values.items() if k in live}

    # ------------------------------------------------------------ what a user does
    async def open(self, page: str, assets: bool = False) -> float:
        """Open ``page`` (its URL path, "" for the default page) as a fresh browser tab would.

        With ``assets`` it first downloads the page's HTML and the static files it names
        (the frontend's scripts, styles and font: about 2.3 MB gzipped, what a browser with an
        empty cache fetches before it opens the websocket); the seconds include them.
        """
        start = time.perf_counter()
        if assets:
            self.asset_bytes += await asyncio.to_thread(self._fetch_assets, page)
        fetched = time.perf_counter() - start
        await self.rerun(page_name=page, page_hash="")
        if self.last_progress_s is not None:   # from the click, the files included
            self.last_progress_s += fetched
        return time.perf_counter() - start

    def _fetch_assets(self, page: str) -> int:
        import gzip
        import re
        import urllib.request

        base = self.url.replace("ws://", "http://").replace("wss://", "https://").removesuffix("/_stcore/stream")

        def get(path: str) -> tuple[bytes, str | None]:
            req = urllib.request.Request(f"{base}/{path}", headers={"Accept-Encoding": "gzip"})
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return r.read(), r.headers.get("Content-Encoding")

        html, encoding = get(page)
        total = len(html)
        text = (gzip.decompress(html) if encoding == "gzip" else html).decode(errors="replace")
        for path in re.findall(r'(?:src|href)="\./((?:static/|favicon)[^"]+)"', text):
            total += len(get(path)[0])
        return total

    async def goto(self, page: str) -> float:
        """Go to ``page`` (its URL path) through the page list, in this session."""
        if page not in self.pages:
            raise ProtocolError(f"no page {page!r} in the navigation: {sorted(self.pages)}")
        return await self.rerun(page_hash=self.pages[page])

    def widget(self, kind: str, label: str) -> Node:
        """The first ``kind`` widget whose label starts with ``label``, in page order."""
        for n in self.elements(kind):
            if n.proto.label.startswith(label):
                return n
        labels = [n.proto.label for n in self.elements(kind)]
        raise ProtocolError(f"no {kind} labelled {label!r} on the page; there are {labels}")

    async def _set(self, node: Node, field: str, value) -> float:
        self.values[node.proto.id] = (field, value)
        return await self.rerun(fragment_id=node.fragment_id)

    async def select(self, label: str, option: str | int) -> float:
        """Pick ``option`` (its text as the page shows it, or its index) in a selectbox."""
        return await self._choose("selectbox", label, option)

    async def radio(self, label: str, option: str | int) -> float:
        return await self._choose("radio", label, option)

    async def _choose(self, kind: str, label: str, option: str | int) -> float:
        node = self.widget(kind, label)
        options = list(node.proto.options)
        if isinstance(option, int):
            option = options[option]
        if option not in options:
            raise ProtocolError(f"{kind} {label!r} has no option {option!r}; it has {options}")
        return await self._set(node, "string_value", option)

    async def checkbox(self, label: str, value: bool = True) -> float:
        return await self._set(self.widget("checkbox", label), "bool_value", bool(value))

    async def number(self, label: str, value: float) -> float:
        node = self.widget("number_input", label)
        field = "int_value" if node.proto.data_type == node.proto.INT else "double_value"
        return await self._set(node, field, int(value) if field == "int_value" else float(value))

    async def click(self, label: str) -> float:
        node = self.widget("button", label)
        return await self.rerun(fragment_id=node.fragment_id, triggers=(node.proto.id,))

    # ------------------------------------------------------------ what a user reads
    def elements(self, kind: str | None = None) -> list[Node]:
        """The page's elements in reading order (the main area, then the sidebar), optionally of one kind."""
        nodes = sorted((n for n in self.nodes.values() if not n.block), key=lambda n: (n.path[0] != 0, n.path))
        return [n for n in nodes if kind is None or n.type == kind]

    def alerts(self, kind: str | None = None) -> list[str]:
        """Bodies of st.error / warning / info / success boxes (``kind`` one of those names)."""
        return [n.proto.body for n in self.elements("alert") if kind is None or ALERT_KINDS.get(n.proto.format) == kind]

    def metric(self, label: str) -> str:
        """The value of the first metric whose label starts with ``label``."""
        for n in self.elements("metric"):
            if n.proto.label.startswith(label):
                return n.proto.body
        raise ProtocolError(f"no metric {label!r}; there are {[n.proto.label for n in self.elements('metric')]}")

    def exceptions(self) -> list[str]:
        """Exception boxes on the page (Streamlit's own, and none should ever show)."""
        return [f"{n.proto.type}: {n.proto.message}" for n in self.elements("exception")]

    def text(self) -> str:
        """Every text the page shows (headings, markdown, alerts, captions, metrics, widget labels), in order."""
        out = []
        for n in self.elements():
            p = n.proto
            if n.type == "metric":
                out.append(f"{p.label}: {p.body}")
            elif hasattr(p, "body"):
                out.append(p.body)
            elif hasattr(p, "label"):
                out.append(p.label)
        return "\n".join(out)
