"""The app as a server, for the browser tests and the class benchmark alike: one home for starting it.

``start_streamlit`` runs ``streamlit run app.py`` headless on a free port and waits until
``/_stcore/health`` answers (as Streamlit's own e2e suite does); ``run_finished`` tells the
"script finished" frame from the rest on the websocket. ``tests/_support.py`` imports this file
(``benchmarks._server``); ``concurrent_users.py`` beside it imports it as ``_server``.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("PACKING_LAB_CHROMIUM", "/usr/bin/chromium")
SERVER_START_S = 90       # a cold 2-core machine imports torch + transformers first


def chromium_path() -> str | None:
    if Path(CHROMIUM).is_file():
        return CHROMIUM
    return shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


@dataclass
class StreamlitServer:
    """``streamlit run app.py`` in a subprocess; its output goes to ``log_path``."""

    url: str
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def start_streamlit(log_path: Path, port: int | None = None, timeout_s: float = SERVER_START_S,
                    script: str = "app.py") -> StreamlitServer:
    """Start the app headless on ``port`` (a free one by default) and wait until it is healthy."""
    port = port or free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1",
           "--browser.gatherUsageStats", "false",
           # Other work may touch the source tree during a run; a rerun mid-run is noise.
           "--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    log.close()  # the child holds its own copy of the descriptor
    server = StreamlitServer(f"http://127.0.0.1:{port}", proc, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}:\n{server.log()[-3000:]}")
        if healthy(server.url):
            return server
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"streamlit was not healthy after {timeout_s:.0f} s:\n{server.log()[-3000:]}")


def run_finished(payload) -> bool:
    """Is this websocket frame the server's "script finished" message (a full or fragment run)?

    Reading the protocol is exact where the DOM is not: a fast rerun can flip ``stApp`` from
    notRunning to running and back inside one render, and an upload starts its rerun late.
    A run cut short by a newer rerun does not count; the newer one will finish.
    """
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    if not isinstance(payload, (bytes, bytearray)):
        return False
    msg = ForwardMsg.FromString(payload)
    return msg.WhichOneof("type") == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN
