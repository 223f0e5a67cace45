"""Hostile input, round 3: every entry point (report, scan, check, verify, --out) as a real CLI process.

One catalogue, seven classes, one parametrised test each. Every case builds its files in
its own temporary folder, runs ``python -m packing_core ...`` as a child process, and is
measured for its exit code, its stderr lines, its wall time and the peak RSS of its whole
process tree (scan workers included)::

    data-destroyed   scan data.txt --out data.txt     -> exit 2, one line, data.txt unchanged
    pickles          an index naming pytorch_model.bin -> exit 2, and the payload never ran
    numbers          a profile of 2**62 documents      -> refused (never a wrapped int64)
    hangs            --profile naming a FIFO           -> one line within seconds
    memory           a 1 MB .npz declaring gigabytes   -> refused under 1 GiB
    tracebacks       JSON nested 100,000 deep          -> one line, no traceback
    short            ANSI escapes in a profile field   -> shown escaped

The contract checked for each: exit 2 and exactly one ``error:`` line matching the case
(or exit 0 and the right numbers), no traceback, no raw control characters, no temporary
file name, peak RSS of the tree <= 1 GiB, and no hang (a timeout per case).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests._support import (
    HOSTILE_ENV,
    HOSTILE_LIMIT_MIB,
    Measured,
    Outcome,
    assert_one_error_line,
    run_cli_tree,
    save_tiny_llama,
    save_word_tokenizer,
    tree_rss,
)

ROOT = Path(__file__).resolve().parents[2]
LIMIT_MIB = HOSTILE_LIMIT_MIB
CLASSES = ("data-destroyed", "pickles", "numbers", "hangs", "memory", "tracebacks", "short")
ENV = HOSTILE_ENV


# ---------------------------------------------------------------- measuring a process tree
_tree_rss = tree_rss   # (tests/_support.py: one runner for every hostile catalogue)


def run_cli(argv: list[str], cwd: Path, timeout: float, env: dict | None = None) -> Measured:
    """``packing-lab *argv`` in ``cwd``: exit code, output, tree peak RSS, seconds."""
    return run_cli_tree(argv, cwd, timeout, env)


# ---------------------------------------------------------------- shared assets (built once)
@dataclass(frozen=True)
class Assets:
    llama: Path          # a real LlamaForCausalLM, random init (speed), vocabulary 128, safetensors
    tokenizer: Path      # a real tokenizers/transformers fast tokenizer folder, 64 tokens, with a chat template
    big_tokenizer: Path  # the same kind, 400 tokens: more than the llama's embedding rows


_save_tokenizer = save_word_tokenizer   # (tests/_support.py)


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> Assets:
    base = tmp_path_factory.mktemp("hostile-assets")
    return Assets(save_tiny_llama(base / "llama", vocab_size=128, max_positions=64),
                  _save_tokenizer(base / "tok", 64), _save_tokenizer(base / "bigtok", 400))


# ---------------------------------------------------------------- building files
def w(folder: Path, name: str, data: bytes | str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def jsonl(folder: Path, name: str, records: list[dict]) -> str:
    return w(folder, name, "".join(json.dumps(r) + "\n" for r in records))


def parquet(folder: Path, name: str, table: pa.Table, **kw) -> str:
    pq.write_table(table, folder / name, **kw)
    return str(folder / name)


def profile(folder: Path, name: str, edit: Callable[[dict], None] | None = None, raw: str | None = None) -> str:
    d = {"schema_version": 1, "kind": "text", "tokenizer": {"name": "bytes", "vocab_hash": "utf-8 bytes",
                                                           "chat_template_hash": None},
         "counts": {"3": 2, "5": 1}, "loss_tokens": None, "cap": None,
         "over_cap": {"documents": 0, "examples": []}, "sources": [], "scan_seconds": 0.1}
    if edit is not None:
        edit(d)
    return w(folder, name, raw if raw is not None else json.dumps(d))


def fifo(folder: Path, name: str) -> str:
    os.mkfifo(folder / name)
    return str(folder / name)


class Payload:
    """A pickle that, if ever unpickled, creates the file ``marker`` (harmless, and easy to detect)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def pickle_bytes(folder: Path) -> bytes:
    return pickle.dumps({"input_ids": Payload(str(folder / "PWNED"))})


def model_copy(a: Assets, folder: Path, name: str = "model") -> Path:
    out = folder / name
    shutil.copytree(a.llama, out)
    return out


def edit_config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


def safetensors_batch(folder: Path, name: str, **arrays) -> str:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(folder / name))
    return str(folder / name)


def npz_declaring(folder: Path, name: str, shape: tuple, fill_mib: int = 0) -> str:
    """An .npz whose member declares ``shape`` (int64); ``fill_mib`` MiB of zeros really compressed in."""
    header = {"descr": "<i8", "fortran_order": False, "shape": shape}
    text = repr(header).encode() + b" "
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text
    with zipfile.ZipFile(folder / name, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("input_ids.npy", "w", force_zip64=True) as f:
            f.write(npy)
            block = bytes(1 << 20)
            for _ in range(fill_mib):
                f.write(block)
    return str(folder / name)


def saved_dataset(folder: Path, name: str, dataset_dict=None, state=None) -> str:
    """A ``save_to_disk`` folder by hand: an Arrow stream plus state.json (and a dataset_dict.json)."""
    root = folder / name
    split = root / "train" if dataset_dict is not None else root
    split.mkdir(parents=True)
    table = pa.table({"text": ["hello", "hi there"]})
    with pa.ipc.new_stream(split / "data-00000-of-00001.arrow", table.schema) as writer:
        writer.write_table(table)
    (split / "state.json").write_text(state if state is not None else
                                      json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    if dataset_dict is not None:
        (root / "dataset_dict.json").write_text(dataset_dict)
    return str(root)


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def scan_json(folder: Path, name: str = "p.json") -> dict:
    return json.loads((folder / name).read_text())


def report_json(r: Measured) -> dict | list:
    return json.loads(r.stdout)


SCAN = ["scan", "--tokenizer", "bytes", "--workers", "0"]


def _char_device(folder: Path) -> str:
    path = folder / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))   # a /dev/null of our own: never the system's
    except PermissionError:
        pytest.skip("making a character device needs root")
    return str(path)


def _socket(folder: Path) -> str:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(folder / "s.json"))
    s.close()
    return str(folder / "s.json")


# ---------------------------------------------------------------- the catalogue
@dataclass(frozen=True)
class Case:
    """``make(folder, assets)`` writes the files and returns the CLI arguments.

    ``error``: a regex the one ``error:`` line must match; None = a valid input, and then
    ``check(result, folder)`` must be true. ``keep`` names files that must come out
    byte-for-byte unchanged; ``seconds`` bounds the wall time (a hang is killed at ``timeout``).
    """

    id: str
    cls: str
    make: Callable
    error: str | None = None
    check: Callable | None = None
    keep: tuple[str, ...] = ()
    seconds: float = 45
    timeout: float = 90
    env: tuple = ()


def _self_links(folder: Path, links: int = 2) -> Path:
    d = folder / "corpus"
    d.mkdir()
    (d / "a.txt").write_text("hello\nworld wide\n")
    for i in range(links):
        (d / f"loop{i}").symlink_to(".")
    (d / "sub").mkdir()
    (d / "sub" / "up").symlink_to("..")
    return d


def _profile_counts(n: int, loss: bool = False) -> str:
    counts = ", ".join(f'"{i}": 1' for i in range(1, n + 1))
    return ('{"schema_version": 1, "kind": "text", "tokenizer": {"name": "bytes"}, "counts": {' + counts + '}, '
            '"sources": [], "over_cap": {}}')


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


def _chat(turns: int) -> dict:
    return {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi hello"} for i in range(turns)]}


def _tok_with(a: Assets, folder: Path, template: str | None = None, **files) -> str:
    out = folder / "tok"
    shutil.copytree(a.tokenizer, out)
    if template is not None:
        cfg = json.loads((out / "tokenizer_config.json").read_text())
        cfg["chat_template"] = template
        (out / "tokenizer_config.json").write_text(json.dumps(cfg))
        (out / "chat_template.jinja").unlink(missing_ok=True)
    for name, data in files.items():
        target = out / name.replace("__", ".")
        target.unlink(missing_ok=True)
        if data == "FIFO":
            os.mkfifo(target)
        else:
            target.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(out)


NESTED_LOOPS = ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
                "{% for m in messages %}{{ m['content'] }}{% endfor %}")
U64_LABEL = 2**64 - 100
INPUTS = "the inputs"


def _ok_scan(docs: int, tokens: int):
    return lambda r, d: (lambda p: p["documents"] == docs and p["tokens"] == tokens)(scan_json(d))


CASES: list[Case] = [
    # ------------------------------------------------ 1. data destroyed: --out never replaces an input or a device
    Case("out-is-the-input", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\nworld wide\n"), "--out", str(d / "data.txt")],
         r"--out .*data.txt is one of the inputs", keep=("data.txt",)),
    Case("out-is-the-jsonl-input", "data-destroyed",
         lambda d, a: [*SCAN, jsonl(d, "c.jsonl", [{"text": "hi"}]), "--out", str(d / "c.jsonl")],
         r"is one of the inputs", keep=("c.jsonl",)),
    Case("out-is-the-parquet-input", "data-destroyed",
         lambda d, a: [*SCAN, parquet(d, "c.parquet", pa.table({"text": ["hi"]})), "--out", str(d / "c.parquet")],
         r"is one of the inputs", keep=("c.parquet",)),
    Case("out-is-a-symlink-to-the-input", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out",
                       str((d / "link.json").symlink_to("data.txt") or d / "link.json")],
         r"is one of the inputs \(.*data.txt\)", keep=("data.txt",)),
    Case("out-is-a-hard-link-to-the-input", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out",
                       str(os.link(d / "data.txt", d / "hard.json") or d / "hard.json")],
         r"is one of the inputs", keep=("data.txt",)),
    Case("out-is-the-input-through-dotdot", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out", str(d / "sub" / ".." / "data.txt")]
         if (d / "sub").mkdir() is None else [],
         r"is one of the inputs", keep=("data.txt",)),
    Case("out-is-a-file-inside-the-input-folder", "data-destroyed",
         lambda d, a: [*SCAN, str(Path(jsonl(d, "corpus/a.jsonl", [{"text": "hi"}])).parent), "--out",
                       str(d / "corpus" / "a.jsonl")],
         r"is one of the inputs", keep=("corpus/a.jsonl",)),
    Case("out-is-matched-by-the-input-glob", "data-destroyed",
         lambda d, a: [*SCAN, str(Path(jsonl(d, "corpus/a.jsonl", [{"text": "hi"}])).parent / "*.jsonl"),
                       "--out", str(d / "corpus" / "a.jsonl")],
         r"is one of the inputs", keep=("corpus/a.jsonl",)),
    Case("out-is-matched-deep-in-a-recursive-glob", "data-destroyed",
         lambda d, a: [*SCAN, str(Path(jsonl(d, "corpus/x/y/a.jsonl", [{"text": "hi"}])).parents[2] / "**" / "*.jsonl"),
                       "--out", str(d / "corpus" / "x" / "y" / "a.jsonl")],
         r"is one of the inputs", keep=("corpus/x/y/a.jsonl",)),
    Case("out-is-a-character-device", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out", _char_device(d)],
         r"--out .*null is a character device; the lab writes only regular files",
         check=None, keep=("data.txt",)),
    Case("out-is-a-fifo", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out", fifo(d, "p.json")],
         r"is a FIFO \(named pipe\); the lab writes only regular files", seconds=20),
    Case("out-is-a-folder", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out", str((d / "out").mkdir() or d / "out")],
         r"--out .*out is a folder"),
    Case("out-is-a-symlink-to-a-folder", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out",
                       str((d / "o").mkdir() or (d / "ol.json").symlink_to("o") or d / "ol.json")],
         r"is a folder"),
    Case("out-is-a-socket", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out", _socket(d)], r"is a socket"),
    Case("out-parent-is-a-file", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out", str(d / "data.txt" / "p.json")],
         r"is a file, not a folder", keep=("data.txt",)),
    Case("out-checked-before-the-scan-starts", "data-destroyed",
         lambda d, a: ["scan", "--tokenizer", "bytes", w(d, "data.txt", "hello\n"), "--out", str(d / "data.txt")],
         r"is one of the inputs", keep=("data.txt",), seconds=15),
    Case("out-replaces-an-old-profile-completely", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\nworld wide\n"), "--out", profile(d, "p.json")],
         check=lambda r, d: scan_json(d)["documents"] == 2 and not list(d.glob(".*part"))),
    Case("out-in-a-new-folder", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "data.txt", "hello\n"), "--out", str(d / "new" / "p.json")],
         check=lambda r, d: json.loads((d / "new" / "p.json").read_text())["tokens"] == 5),

    # ------------------------------------------------ 2. pickles: nothing unpickled, through any disguise
    Case("index-points-at-a-pickle", "pickles",
         lambda d, a: ["verify", "--model", str(_indexed(d, a, "pytorch_model.bin"))],
         r"model.safetensors.index.json points at 'pytorch_model.bin', which is not a .safetensors file"),
    Case("check-model-index-points-at-a-pickle", "pickles",
         lambda d, a: ["check", _ok_batch(d), "--model", str(_indexed(d, a, "pytorch_model.bin"))],
         r"points at 'pytorch_model.bin'"),
    Case("bin-index-beside-safetensors", "pickles",
         lambda d, a: ["verify", "--model", str(_indexed(d, a, "pytorch_model.bin", "pytorch_model.bin.index.json"))],
         r"pytorch_model.bin.index.json points at 'pytorch_model.bin'"),
    Case("index-points-outside-the-folder", "pickles",
         lambda d, a: ["verify", "--model", str(_indexed(d, a, "../outside.safetensors"))],
         r"points at '../outside.safetensors', which is not a .safetensors file in the folder"),
    Case("index-points-at-a-pt-file", "pickles",
         lambda d, a: ["verify", "--model", str(_indexed(d, a, "weights.pt"))], r"points at 'weights.pt'"),
    Case("only-pickled-weights", "pickles",
         lambda d, a: ["verify", "--model", str(_only_pickle(d, a))], r"has no \*.safetensors weights \(only pickles"),
    Case("safetensors-that-is-a-pickle", "pickles",
         lambda d, a: ["verify", "--model", str(_disguised_weights(d, a))],
         r"model.safetensors is not a safetensors file \(its header length"),
    Case("batch-pt", "pickles", lambda d, a: ["check", w(d, "b.pt", pickle_bytes(d))], r"never loads pickles"),
    Case("batch-pkl", "pickles", lambda d, a: ["check", w(d, "b.pkl", pickle_bytes(d))], r"never loads pickles"),
    Case("batch-bin", "pickles", lambda d, a: ["check", w(d, "b.bin", pickle_bytes(d))], r"never loads pickles"),
    Case("batch-pickle-named-json", "pickles", lambda d, a: ["check", w(d, "b.json", pickle_bytes(d))],
         r"b.json is a pickle|never loads pickles|not .*JSON"),
    Case("batch-pickle-named-safetensors", "pickles",
         lambda d, a: ["check", w(d, "b.safetensors", pickle_bytes(d))], r"never loads pickles"),
    Case("batch-torch-save-named-npz", "pickles", lambda d, a: ["check", _torch_zip(d, "b.npz")],
         r"torch.save archive \(it holds a data.pkl\)"),
    Case("batch-npz-of-python-objects", "pickles", lambda d, a: ["check", _object_npz(d)],
         r"Python objects"),
    Case("config-auto-map-remote-code-never-runs", "pickles",
         lambda d, a: ["verify", "--model", str(_remote_code(d, a))],
         check=lambda r, d: "Every document matches" in r.stdout),   # trust_remote_code=False: the stock Llama

    # ------------------------------------------------ 3. wrong numbers: exact, or refused
    Case("profile-2-to-the-62-documents", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={"5": 2**62}))],
         r"count of length 5 is 4,611,686,018,427,387,904, more than the lab accepts \(1,073,741,824\)"),
    Case("profile-count-2-to-the-70", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={"5": 2**70}))],
         r"1,180,591,620,717,411,303,424, more than the lab accepts"),
    Case("profile-count-infinity", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", raw=json.dumps(
             {"schema_version": 1, "counts": {"5": 1}}).replace("1}", "Infinity}"))],
         r"holds Infinity, which is not a number JSON allows"),
    Case("profile-count-nan", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", raw='{"schema_version": 1, "counts": {"5": NaN}}')],
         r"holds NaN"),
    Case("profile-count-fraction", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={"5": 2.5}))],
         r"count of length 5 is '2.5', not a whole number"),
    Case("profile-count-boolean", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={"5": True}))],
         r"count of length 5 is 'True', not a whole number"),
    Case("profile-length-key-twice", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", raw=profile_text().replace('"3": 2', '"3": 1, "3": 1'))],
         r"holds the key '3' twice in one object"),
    Case("profile-length-key-twice-as-07", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", raw=profile_text().replace('"3": 2', '"3": 1, "03": 1'))],
         r"the length 3 appears twice"),
    Case("profile-version-true", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(schema_version=True))],
         r"schema_version True; this lab reads version 1"),
    Case("profile-version-float", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(schema_version=1.0))],
         r"schema_version 1.0"),
    Case("profile-length-2-to-the-41", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={str(2**41): 1}))],
         r"length is 2,199,023,255,552, more than the lab accepts"),
    Case("profile-length-negative", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={"-5": 1}))],
         r"length is -5, negative"),
    Case("profile-tokens-past-max-total", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={str(2**40): 2**14}))],
         r"holds 18,014,398,509,481,984 tokens, more than the lab accepts \(9,007,199,254,740,992\)"),
    Case("profile-documents-field-disagrees", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(documents=4))],
         r"says documents = 4 but its counts give 3"),
    Case("profile-documents-field-true", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(documents=True))],
         r"says documents = True"),
    Case("profile-a-billion-documents-exact", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts={"5": 2**30})),
                       "--format", "json", "--strategy", "bfd"],
         check=lambda r, d: report_json(r)["profile"]["documents"] == 2**30
         and report_json(r)["profile"]["tokens"] == 5 * 2**30),
    Case("profile-loss-tokens-past-length-times-count", "numbers",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(loss_tokens={"3": 7, "5": 1}))],
         r"loss tokens of length 3 are 7, outside 0..6"),
    Case("batch-uint64-label-wraps-to-ignore-index", "numbers",
         lambda d, a: ["check", safetensors_batch(d, "b.safetensors", input_ids=np.arange(1, 9).reshape(1, 8),
                                                  labels=np.array([[1, 2, 3, U64_LABEL, 5, 6, 7, 8]], np.uint64))],
         r"labels holds 18,446,744,073,709,551,516 \(uint64\), past the int64 range.*wrap to -100"),
    Case("batch-uint64-label-in-npz", "numbers",
         lambda d, a: ["check", _npz(d, "b.npz", input_ids=np.arange(1, 9).reshape(1, 8),
                                     labels=np.array([[1, 2, 3, U64_LABEL, 5, 6, 7, 8]], np.uint64))],
         r"labels holds 18,446,744,073,709,551,516 \(uint64\)"),
    Case("batch-json-label-past-int64", "numbers",
         lambda d, a: ["check", w(d, "b.json", '{"input_ids": [[1, 2, 3]], "labels": [[1, %d, 3]]}' % U64_LABEL)],
         r"holds the integer 18,446,744,073,709,551,516, past 9,223,372,036,854,775,807"),
    Case("batch-uint64-position-ids", "numbers",
         lambda d, a: ["check", safetensors_batch(d, "b.safetensors", input_ids=np.arange(1, 5).reshape(1, 4),
                                                  position_ids=np.array([[0, 1, 2**64 - 1, 3]], np.uint64))],
         r"position_ids holds 18,446,744,073,709,551,615"),
    Case("glob-through-a-self-linking-folder-counts-each-file-once", "numbers",
         lambda d, a: [*SCAN, str(_self_links(d, 1) / "**" / "*.txt"), "--out", str(d / "p.json")],
         check=_ok_scan(2, 15), seconds=20),
    Case("folder-with-a-self-link-counts-each-file-once", "numbers",
         lambda d, a: [*SCAN, str(_self_links(d, 1)), "--out", str(d / "p.json")], check=_ok_scan(2, 15)),
    Case("hard-links-in-a-folder-count-once", "numbers",
         lambda d, a: [*SCAN, str(_hard_links(d)), "--out", str(d / "p.json")], check=_ok_scan(2, 15)),
    Case("a-file-given-twice-counts-twice", "numbers",
         lambda d, a: [*SCAN, w(d, "a.txt", "hello\nworld wide\n"), str(d / "a.txt"), "--out", str(d / "p.json")],
         check=_ok_scan(4, 30)),
    Case("uint64-max-length-in-parquet-names-its-value", "numbers",
         lambda d, a: ["report", parquet(d, "u.parquet", pa.table({"length": pa.array([5, 2**64 - 1], pa.uint64())}))],
         r"holds 18,446,744,073,709,551,615"),
    Case("uint64-max-length-in-csv-names-its-value", "numbers",
         lambda d, a: ["report", w(d, "u.csv", f"length\n5\n{2**64 - 1}\n")], r"18446744073709551615"),
    Case("uint64-max-length-in-lengths-names-its-value", "numbers",
         lambda d, a: ["report", "--lengths", f"5,{2**64 - 1}"], r"18446744073709551615"),
    Case("scan-counts-are-exact", "numbers",
         lambda d, a: [*SCAN, jsonl(d, "c.jsonl", [{"text": "x" * n} for n in (1, 7, 7, 300)]), "--out",
                       str(d / "p.json")], check=lambda r, d: scan_json(d)["counts"] == {"1": 1, "7": 2, "300": 1}),

    # ------------------------------------------------ 4. hangs: every loop bounded, no FIFO opened
    Case("profile-is-a-fifo", "hangs", lambda d, a: ["report", "--profile", fifo(d, "p.json")],
         r"p.json is a FIFO \(named pipe\), not a regular file", seconds=15),
    Case("texts-is-a-fifo", "hangs", lambda d, a: ["verify", "--model", str(a.llama), "--texts", fifo(d, "t.txt")],
         r"t.txt is a FIFO", seconds=30),
    Case("report-file-is-a-fifo", "hangs", lambda d, a: ["report", fifo(d, "f.csv")], r"is a FIFO", seconds=15),
    Case("scan-input-is-a-fifo", "hangs", lambda d, a: [*SCAN, fifo(d, "f.jsonl"), "--out", str(d / "p.json")],
         r"f.jsonl is a FIFO", seconds=15),
    Case("check-batch-is-a-fifo", "hangs", lambda d, a: ["check", fifo(d, "b.json")], r"b.json is a FIFO", seconds=20),
    Case("glob-through-two-self-links", "hangs",
         lambda d, a: [*SCAN, str(_self_links(d, 2) / "**" / "*.txt"), "--out", str(d / "p.json")],
         check=_ok_scan(2, 15), seconds=20),
    Case("folder-with-two-self-links", "hangs",
         lambda d, a: [*SCAN, str(_self_links(d, 2)), "--out", str(d / "p.json")], check=_ok_scan(2, 15), seconds=20),
    Case("symlink-loop-as-scan-input", "hangs",
         lambda d, a: [*SCAN, str((d / "l.jsonl").symlink_to("l.jsonl") or d / "l.jsonl"), "--out", str(d / "p.json")],
         r"symbolic link loop", seconds=15),
    Case("chat-of-6000-turns", "hangs",
         lambda d, a: ["scan", "--tokenizer", str(a.tokenizer), "--workers", "0",
                       jsonl(d, "chat.jsonl", [_chat(6000)]), "--out", str(d / "p.json")],
         r"6,000 messages in one chat, more than the lab renders \(512\)", seconds=30),
    Case("chat-of-500-turns-renders-in-time", "hangs",
         lambda d, a: ["scan", "--tokenizer", str(a.tokenizer), "--workers", "0",
                       jsonl(d, "chat.jsonl", [_chat(500)]), "--out", str(d / "p.json")],
         check=lambda r, d: scan_json(d)["documents"] == 1, seconds=60),
    Case("chat-template-with-nested-loops", "hangs",
         lambda d, a: ["scan", "--tokenizer", _tok_with(a, d, NESTED_LOOPS), "--workers", "0",
                       jsonl(d, "chat.jsonl", [_chat(2)]), "--out", str(d / "p.json")],
         r"the chat template took more than 2 s", seconds=30),
    Case("chat-template-with-nested-loops-in-a-worker", "hangs",
         lambda d, a: ["scan", "--tokenizer", _tok_with(a, d, NESTED_LOOPS), "--workers", "1",
                       jsonl(d, "chat.jsonl", [_chat(2)]), "--out", str(d / "p.json")],
         r"the chat template took more than 2 s", seconds=40),
    Case("check-model-on-2000-documents", "hangs",
         lambda d, a: ["check", safetensors_batch(d, "b.safetensors", input_ids=np.ones((1, 4000), np.int64),
                                                  position_ids=np.tile([0, 1], (1, 2000))), "--model", str(a.llama)],
         r"holds 2,000 documents; running a model runs each one alone, and is limited to 512", seconds=40),
    Case("config-of-100000-layers", "hangs",
         lambda d, a: ["verify", "--model", str(_config(d, a, num_hidden_layers=100_000))],
         r"num_hidden_layers = 100,000, more layers than the lab builds \(256\)", seconds=30),
    Case("weights-file-is-a-fifo", "hangs", lambda d, a: ["verify", "--model", str(_fifo_weights(d, a))],
         r"model.safetensors is a FIFO", seconds=30),
    Case("config-is-a-fifo", "hangs", lambda d, a: ["verify", "--model", str(_fifo_config(d, a))],
         r"config.json is a FIFO", seconds=30),
    Case("tokenizer-json-is-a-fifo", "hangs",
         lambda d, a: [*SCAN[:1], "--tokenizer", _tok_with(a, d, tokenizer__json="FIFO"), "--workers", "0",
                       jsonl(d, "c.jsonl", [{"text": "hi"}]), "--out", str(d / "p.json")],
         r"tokenizer.json is a FIFO", seconds=30),

    # ------------------------------------------------ 5. memory: <= 1 GiB for the whole process tree
    Case("npz-declaring-gigabytes", "memory",
         lambda d, a: ["check", npz_declaring(d, "b.npz", (1, 500_000_000))],
         r"declares shape \(1, 500000000\) \(500,000,000 values\), more than a batch may hold"),
    Case("npz-that-inflates-past-the-limit", "memory",
         lambda d, a: ["check", npz_declaring(d, "b.npz", (1, 40_000_000), fill_mib=300)],
         r"unpacks to .* bytes in 1 arrays, more than a batch may hold"),
    Case("batch-of-4M-tokens", "memory",
         lambda d, a: ["check", safetensors_batch(d, "b.safetensors", input_ids=np.ones((1, 4_000_000), np.int64))],
         r"input_ids holds 4,000,000 values, more than a batch may hold \(1,048,576 tokens\)"),
    Case("json-batch-bomb-60MB", "memory", lambda d, a: ["check", w(d, "b.json", "[" + "1," * 30_000_000 + "1]")],
         r"60,000,003 bytes of JSON, more than the lab parses"),
    Case("json-batch-of-a-million-values", "memory",
         lambda d, a: ["check", w(d, "b.json", '{"input_ids": [[' + "1," * 5_000_000 + "1]]}")],
         r"JSON values, more than the lab reads"),
    Case("dev-zero-as-profile", "memory", lambda d, a: ["report", "--profile", "/dev/zero"],
         r"/dev/zero is a character device"),
    Case("dev-zero-as-texts", "memory", lambda d, a: ["verify", "--model", str(a.llama), "--texts", "/dev/zero"],
         r"/dev/zero is a character device"),
    Case("dev-zero-as-batch", "memory", lambda d, a: ["check", "/dev/zero"], r"/dev/zero is a character device"),
    Case("dev-zero-as-scan-input", "memory", lambda d, a: [*SCAN, "/dev/zero", "--out", str(d / "p.json")],
         r"cannot tell the format|character device"),
    Case("dev-zero-linked-as-jsonl", "memory",
         lambda d, a: [*SCAN, str((d / "z.jsonl").symlink_to("/dev/zero") or d / "z.jsonl"), "--out", str(d / "p.json")],
         r"z.jsonl is a character device"),
    Case("profile-of-1e7-distinct-lengths", "memory",
         lambda d, a: ["report", "--profile", w(d, "p.json", b'{"counts": {' + b'"1": 1, ' * 10_000_000 + b'"2": 1}}')],
         r"larger than 67,108,864 bytes"),
    Case("profile-of-1.5M-distinct-lengths", "memory",
         lambda d, a: ["report", "--profile", w(d, "p.json", _profile_counts(1_500_000))],
         r"1,500,000 distinct lengths, more than the lab accepts \(1,048,576\)"),
    Case("profile-json-bomb", "memory", lambda d, a: ["report", "--profile", w(d, "p.json", "[" + "1," * 20_000_000 + "1]")],
         r"JSON values, more than the lab reads"),
    Case("workers-a-million", "memory",
         lambda d, a: ["scan", "--tokenizer", "bytes", "--workers", "1000000", w(d, "a.txt", "hi\n"), "--out",
                       str(d / "p.json")], r"workers must be at most 8, got 1,000,000"),
    Case("workers-8-on-many-row-groups", "memory",
         lambda d, a: ["scan", "--tokenizer", "bytes", "--workers", "8",
                       parquet(d, "rg.parquet", pa.table({"text": ["hello"] * 4000}), row_group_size=10),
                       "--out", str(d / "p.json")], check=_ok_scan(4000, 20000), seconds=60),
    Case("one-length-of-5e9", "memory", lambda d, a: ["report", "--lengths", "5000000000"],
         r"would make 9,765,625 pieces .* at most 4,000,000 extra pieces"),
    Case("one-length-of-2e9-is-planned", "memory",
         lambda d, a: ["report", "--lengths", "2000000000", "--strategy", "bfd", "--format", "json"],
         check=lambda r, d: report_json(r)["strategies"][0]["real_tokens"] == 2_000_000_000),
    Case("scan-parquet-one-100MB-text-in-a-worker", "memory",
         lambda d, a: ["scan", "--tokenizer", "bytes", "--workers", "1",
                       parquet(d, "t.parquet", pa.table({"text": ["a" * 100_000_000]})), "--out", str(d / "p.json")],
         r"holds 100,000,0\d\d bytes of text in 1 rows \(from its metadata\), more than one document"),
    Case("scan-parquet-one-20MB-text-among-short-ones", "memory",
         lambda d, a: [*SCAN, parquet(d, "t.parquet", pa.table({"text": ["hi"] * 2000 + ["a" * 20_000_000]})),
                       "--out", str(d / "p.json")],
         r"row 2001: 'text' holds 20,000,000 bytes, more than one document may hold"),
    Case("scan-jsonl-one-50MB-line", "memory",
         lambda d, a: [*SCAN, w(d, "l.jsonl", '{"text": "' + "a" * 50_000_000 + '"}\n'), "--out", str(d / "p.json")],
         r"line 1 is longer than 4,194,304 bytes"),
    Case("scan-jsonl-gz-one-50MB-line", "memory",
         lambda d, a: [*SCAN, w(d, "l.jsonl.gz", _gz('{"text": "' + "a" * 50_000_000 + '"}\n')), "--out",
                       str(d / "p.json")], r"line 1 is longer than 4,194,304 bytes"),
    Case("scan-txt-one-50MB-line", "memory",
         lambda d, a: [*SCAN, w(d, "l.txt", "a" * 50_000_000 + "\n"), "--out", str(d / "p.json")],
         r"line 1 is longer than"),
    Case("check-model-on-a-16k-token-row", "memory",
         lambda d, a: ["check", safetensors_batch(d, "b.safetensors", input_ids=np.ones((1, 16_384), np.int64)),
                       "--model", str(a.llama)],
         r"1 row\(s\) of 16,384 tokens: running sdpa on it builds a mask of 268,435,456 cells .* more than the lab "
         r"runs within 1 GiB"),
    Case("config-json-of-50MB", "memory",
         lambda d, a: ["verify", "--model", str(_big_config(d, a))], r"config .*larger than 4,194,304 bytes"),
    Case("tokenizer-config-of-80MB", "memory",
         lambda d, a: ["scan", "--tokenizer", _tok_with(a, d, tokenizer_config__json=b" " * (80 << 20)), "--workers",
                       "0", jsonl(d, "c.jsonl", [{"text": "hi"}]), "--out", str(d / "p.json")],
         r"more than a tokenizer file may be"),

    # ------------------------------------------------ 6. tracebacks: one line instead
    Case("profile-nested-100000-deep", "tracebacks", lambda d, a: ["report", "--profile", w(d, "p.json", _deep())],
         r"nested too deeply"),
    Case("batch-json-nested-100000-deep", "tracebacks", lambda d, a: ["check", w(d, "b.json", _deep())],
         r"nested too deeply"),
    Case("scan-jsonl-nested-100000-deep", "tracebacks",
         lambda d, a: [*SCAN, w(d, "c.jsonl", '{"text": ' + _deep() + "}\n"), "--out", str(d / "p.json")],
         r"line 1 is nested too deeply"),
    Case("report-jsonl-nested-100000-deep", "tracebacks",
         lambda d, a: ["report", w(d, "c.jsonl", '{"text": ' + _deep() + "}\n")], r"nested too deeply"),
    Case("config-json-nested-100000-deep", "tracebacks",
         lambda d, a: ["verify", "--model", str(_raw_config(d, a, _deep()))], r"config.json is nested too deeply"),
    Case("config-json-is-a-list", "tracebacks", lambda d, a: ["verify", "--model", str(_raw_config(d, a, "[1]"))],
         r"config.json holds a JSON list, not an object"),
    Case("config-json-not-json", "tracebacks", lambda d, a: ["verify", "--model", str(_raw_config(d, a, "{oops"))],
         r"config.json is not JSON"),
    Case("config-hidden-size-1e12", "tracebacks",
         lambda d, a: ["verify", "--model", str(_config(d, a, hidden_size=10**12))],
         r"hidden_size = 1,000,000,000,000, more units"),
    Case("config-vocab-1e12", "tracebacks", lambda d, a: ["verify", "--model", str(_config(d, a, vocab_size=10**12))],
         r"vocab_size = 1,000,000,000,000, more tokens"),
    Case("config-layers-as-text", "tracebacks",
         lambda d, a: ["verify", "--model", str(_config(d, a, num_hidden_layers="lots"))],
         r"num_hidden_layers is 'lots', not a whole number"),
    Case("config-parameters-past-the-limit", "tracebacks",
         lambda d, a: ["verify", "--model", str(_config(d, a, hidden_size=8192, intermediate_size=32768,
                                                         num_hidden_layers=200, num_attention_heads=64))],
         r"describes about [\d,]+ parameters, more than the lab builds"),
    Case("index-json-not-json", "tracebacks",
         lambda d, a: ["verify", "--model", str(_raw_index(d, a, "{not json"))], r"index.json is not JSON"),
    Case("index-json-without-weight-map", "tracebacks",
         lambda d, a: ["verify", "--model", str(_raw_index(d, a, '{"metadata": {}}'))], r"has no weight_map"),
    Case("dataset-dict-json-damaged", "tracebacks",
         lambda d, a: [*SCAN, saved_dataset(d, "ds", dataset_dict="{broken"), "--out", str(d / "p.json")],
         r"dataset_dict.json is not JSON"),
    Case("dataset-dict-split-is-dot", "tracebacks",
         lambda d, a: [*SCAN, saved_dataset(d, "ds", dataset_dict='{"splits": ["."]}'), "--out", str(d / "p.json")],
         r"lists '.' as a split, which is not a plain name"),
    Case("dataset-dict-split-leaves-the-folder", "tracebacks",
         lambda d, a: [*SCAN, saved_dataset(d, "ds", dataset_dict='{"splits": ["../.."]}'), "--out", str(d / "p.json")],
         r"not a plain name"),
    Case("dataset-dict-splits-not-a-list", "tracebacks",
         lambda d, a: [*SCAN, saved_dataset(d, "ds", dataset_dict='{"splits": 7}'), "--out", str(d / "p.json")],
         r"splits is not a list"),
    Case("state-json-damaged", "tracebacks",
         lambda d, a: [*SCAN, saved_dataset(d, "ds", state="{broken"), "--out", str(d / "p.json")],
         r"state.json is not JSON"),
    Case("state-json-file-outside", "tracebacks",
         lambda d, a: [*SCAN, saved_dataset(d, "ds", state='{"_data_files": [{"filename": "/etc/passwd"}]}'),
                       "--out", str(d / "p.json")], r"'/etc/passwd' as a data file, which is not a plain name"),
    Case("saved-dataset-reads", "tracebacks",
         lambda d, a: [*SCAN, saved_dataset(d, "ds", dataset_dict='{"splits": ["train"]}'), "--out",
                       str(d / "p.json")], check=_ok_scan(2, 13)),
    Case("tokenizer-larger-than-the-model", "tracebacks",
         lambda d, a: ["verify", "--model", str(_with_tokenizer(d, a, a.big_tokenizer))],
         r"has 400 tokens but the model's embedding has 128 rows"),
    Case("broken-tokenizer-in-workers", "tracebacks",
         lambda d, a: ["scan", "--tokenizer", _tok_with(a, d, tokenizer__json="{not json"), "--workers", "2",
                       jsonl(d, "c.jsonl", [{"text": "hi"}]), "--out", str(d / "p.json")],
         r"could not read .*tokenizer.json"),
    Case("broken-tokenizer-is-not-out-of-memory", "tracebacks",
         lambda d, a: ["scan", "--tokenizer", _tok_with(a, d, tokenizer__json="{not json"), "--workers", "2",
                       jsonl(d, "c.jsonl", [{"text": "hi"}]), "--out", str(d / "p.json")],
         r"^(?!.*out of memory).*tokenizer"),
    Case("tokenizer-config-nested-deep", "tracebacks",
         lambda d, a: ["scan", "--tokenizer", _tok_with(a, d, tokenizer_config__json=_deep()), "--workers", "0",
                       jsonl(d, "c.jsonl", [{"text": "hi"}]), "--out", str(d / "p.json")], r"nested too deeply"),
    Case("corrupt-safetensors-weights", "tracebacks",
         lambda d, a: ["verify", "--model", str(_corrupt_weights(d, a))], r"model.safetensors is truncated or damaged"),
    Case("model-folder-without-config", "tracebacks",
         lambda d, a: ["verify", "--model", str((d / "m").mkdir() or d / "m")], r"has no config.json"),
    Case("profile-counts-not-an-object", "tracebacks",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(counts=[1, 2]))],
         r"mangles the field"),

    # ------------------------------------------------ 7. falling short: escaped, quiet, no temporary names
    Case("ansi-escapes-in-profile-tokenizer-name", "short",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p["tokenizer"].update(
             name="\x1b]0;pwned\x07\x1b[2J"))],
         check=lambda r, d: "\x1b" not in r.stdout and "\\x1b]0;pwned" in r.stdout),
    Case("ansi-escapes-in-profile-kind", "short",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(kind="\x1b[2Jtext"))],
         r"got '\\x1b\[2Jtext'"),
    Case("bidi-override-in-profile-source", "short",
         lambda d, a: ["report", "--profile", profile(d, "p.json", lambda p: p.update(
             sources=[{"name": "a\u202ecod.parquet", "rows": 3}])), "--format", "json"],
         check=lambda r, d: "\u202e" not in r.stdout),
    Case("ansi-escapes-in-scan-file-name", "short",
         lambda d, a: [*SCAN, w(d, "t\x1b]0;pwned\x07.jsonl", "{oops\n"), "--out", str(d / "p.json")],
         r"t\\x1b\]0;pwned\\x07.jsonl"),
    Case("newline-in-scan-file-name", "short",
         lambda d, a: [*SCAN, w(d, "two\nlines.jsonl", "{oops\n"), "--out", str(d / "p.json")], r"two\\nlines.jsonl"),
    Case("ansi-escapes-in-out-name", "short",
         lambda d, a: [*SCAN, w(d, "a.txt", "hi\n"), "--out", str((d / "o\x1b[2J").mkdir() or d / "o\x1b[2J")],
         r"o\\x1b\[2J is a folder"),
    Case("ansi-escapes-in-jsonl-key", "short",
         lambda d, a: ["report", w(d, "k.jsonl", '{"\\u001b[2J": 1, "b": 2}\n'), "--column", "text"],
         r"\\x1b\[2J|error"),
    Case("ansi-escapes-in-tokenizer-path", "short",
         lambda d, a: [*SCAN[:1], "--tokenizer", str(d / "t\x1b[2J"), w(d, "a.txt", "hi\n"), "--out", str(d / "p.json")],
         r"t\\x1b\[2J"),
    Case("no-temporary-name-when-the-write-fails", "short",
         lambda d, a: [*SCAN, w(d, "a.txt", "hi\n"), "--out", "/proc/self/p.json"], r"^(?!.*\.part).*p\.json"),
    Case("no-progress-bars-from-verify-model-path", "short",
         lambda d, a: ["verify", "--model", str(a.llama)], check=lambda r, d: r.stderr == "", seconds=60),
    Case("no-progress-bars-from-check-model-path", "short",
         lambda d, a: ["check", _ok_batch(d), "--model", str(a.llama)],
         check=lambda r, d: r.stderr == "" and "SOUND" in r.stdout.upper(), seconds=60),
    Case("texts-file-not-utf8", "short",
         lambda d, a: ["verify", "--model", str(a.llama), "--texts", w(d, "t.txt", b"caf\xe9\nok\n")],
         r"t.txt is not UTF-8 text \(byte 3 is 0xe9\)"),
    Case("profile-in-utf16", "short",
         lambda d, a: ["report", "--profile", w(d, "p.json", profile_text().encode("utf-16"))], r"not UTF-8"),
    Case("profile-that-is-not-json-says-how-to-make-one", "short",
         lambda d, a: ["report", "--profile", w(d, "p.json", "hello")], r"p.json is not JSON .*packing_core scan"),
]


def profile_text() -> str:
    return json.dumps({"schema_version": 1, "kind": "text", "tokenizer": {"name": "bytes"}, "counts": {"3": 2, "5": 1},
                       "sources": [], "over_cap": {}})


def _gz(text: str) -> bytes:
    import gzip

    return gzip.compress(text.encode(), compresslevel=1)


def _npz(folder: Path, name: str, **arrays) -> str:
    np.savez(folder / name, **arrays)
    return str(folder / name)


def _ok_batch(folder: Path) -> str:
    return safetensors_batch(folder, "ok.safetensors", input_ids=np.arange(1, 9).reshape(1, 8),
                             position_ids=np.array([[0, 1, 2, 3, 0, 1, 2, 3]]))


def _indexed(folder: Path, a: Assets, target: str, index: str = "model.safetensors.index.json") -> Path:
    m = model_copy(a, folder)
    (m / "pytorch_model.bin").write_bytes(pickle_bytes(folder))
    (m / "weights.pt").write_bytes(pickle_bytes(folder))
    from safetensors.numpy import load_file

    names = list(load_file(str(m / "model.safetensors")))
    (m / index).write_text(json.dumps({"metadata": {}, "weight_map": {n: target for n in names}}))
    return m


def _only_pickle(folder: Path, a: Assets) -> Path:
    m = model_copy(a, folder)
    (m / "model.safetensors").unlink()
    (m / "pytorch_model.bin").write_bytes(pickle_bytes(folder))
    return m


def _disguised_weights(folder: Path, a: Assets) -> Path:
    m = model_copy(a, folder)
    (m / "model.safetensors").write_bytes(pickle_bytes(folder))
    return m


def _torch_zip(folder: Path, name: str) -> str:
    with zipfile.ZipFile(folder / name, "w") as z:
        z.writestr("archive/data.pkl", pickle_bytes(folder))
    return str(folder / name)


def _object_npz(folder: Path) -> str:
    np.savez(folder / "o.npz", input_ids=np.array([Payload(str(folder / "PWNED"))], dtype=object))
    return str(folder / "o.npz")


def _remote_code(folder: Path, a: Assets) -> Path:
    m = model_copy(a, folder)
    (m / "evil.py").write_text(f"open({str(folder / 'PWNED')!r}, 'w')\n")
    edit_config(m, auto_map={"AutoModelForCausalLM": "evil.Evil", "AutoConfig": "evil.EvilConfig"})
    return m


def _config(folder: Path, a: Assets, **changes) -> Path:
    m = model_copy(a, folder)
    edit_config(m, **changes)
    return m


def _raw_config(folder: Path, a: Assets, text: str) -> Path:
    m = model_copy(a, folder)
    (m / "config.json").write_text(text)
    return m


def _raw_index(folder: Path, a: Assets, text: str) -> Path:
    m = model_copy(a, folder)
    (m / "model.safetensors.index.json").write_text(text)
    return m


def _big_config(folder: Path, a: Assets) -> Path:
    m = model_copy(a, folder)
    cfg = json.loads((m / "config.json").read_text())
    cfg["padding"] = "x" * 50_000_000
    (m / "config.json").write_text(json.dumps(cfg))
    return m


def _fifo_weights(folder: Path, a: Assets) -> Path:
    m = model_copy(a, folder)
    (m / "model.safetensors").unlink()
    os.mkfifo(m / "model.safetensors")
    return m


def _fifo_config(folder: Path, a: Assets) -> Path:
    m = model_copy(a, folder)
    (m / "config.json").unlink()
    os.mkfifo(m / "config.json")
    return m


def _corrupt_weights(folder: Path, a: Assets) -> Path:
    m = model_copy(a, folder)
    data = (m / "model.safetensors").read_bytes()
    (m / "model.safetensors").write_bytes(data[: len(data) // 3])
    return m


def _with_tokenizer(folder: Path, a: Assets, tokenizer: Path) -> Path:
    m = model_copy(a, folder)
    for f in tokenizer.iterdir():
        shutil.copy(f, m / f.name)
    return m


def _hard_links(folder: Path) -> Path:
    d = folder / "corpus"
    d.mkdir()
    (d / "a.txt").write_text("hello\nworld wide\n")
    os.link(d / "a.txt", d / "b.txt")
    return d


assert {c.cls for c in CASES} == set(CLASSES), {c.cls for c in CASES} ^ set(CLASSES)
assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"


# ---------------------------------------------------------------- running the catalogue
def _run_case(case: Case, folder: Path, a: Assets) -> Outcome:
    try:
        argv = case.make(folder, a)
    except pytest.skip.Exception as e:
        return Outcome(None, folder, {}, skipped=str(e))
    before = {k: sha(folder / k) for k in case.keep}
    return Outcome(run_cli(argv, folder, case.timeout, dict(case.env)), folder, before)


@pytest.fixture(scope="module")
def outcomes(request, assets, tmp_path_factory):
    """The selected cases (``-k`` works), two at a time: the machine has two cores."""
    wanted = {item.callspec.params["case"].id for item in request.session.items   # doctest items have no module
              if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
              and "case" in item.callspec.params}
    chosen = [c for c in CASES if c.id in wanted]
    folders = {c.id: tmp_path_factory.mktemp(c.id[:40]) for c in chosen}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {c.id: pool.submit(_run_case, c, folders[c.id], assets) for c in chosen}
    yield futures
    report = os.environ.get("PACKING_LAB_HOSTILE_REPORT")   # the figures behind docs/measurements.md
    if report:
        rows = [{"case": c.id, "class": c.cls, "exit": r.rc, "seconds": round(r.seconds, 2),
                 "peak_mib": round(r.peak_mib, 1), "stderr": r.stderr.strip().splitlines()[-1:][0][:200]
                 if r.stderr.strip() else ""}
                for c in chosen if (r := futures[c.id].result().result) is not None]
        Path(report).write_text(json.dumps(rows, indent=1))


def _assert_contract(case: Case, out: Outcome) -> Measured:
    if out.skipped:
        pytest.skip(out.skipped)
    r = out.result
    assert r.rc not in (-9, 137), f"killed after {case.timeout:.0f} s: a hang"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.peak_mib <= LIMIT_MIB, f"peak RSS of the process tree {r.peak_mib:,.0f} MiB > {LIMIT_MIB} MiB"
    assert r.seconds <= case.seconds, f"took {r.seconds:.1f} s (bound {case.seconds} s)"
    assert not (out.folder / "PWNED").exists(), "a planted pickle ran"
    assert not list(out.folder.rglob(".*.part")), "a temporary file was left behind"
    for name, digest in out.before.items():
        assert sha(out.folder / name) == digest, f"{name} was changed"
    if case.error is None:
        assert r.rc == 0, r.stderr[-1000:]
        assert case.check(r, out.folder), (r.stdout[:2000], r.stderr[-1000:])
        return r
    return assert_one_error_line(r, case.error)


def _params(cls: str):
    return [pytest.param(c, id=c.id) for c in CASES if c.cls == cls]


@pytest.mark.parametrize("case", _params("data-destroyed"))
def test_data_destroyed_never_an_input_a_device_or_a_folder_replaced(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("pickles"))
def test_pickles_never_loaded_through_any_disguise(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("numbers"))
def test_numbers_exact_or_refused_never_wrapped(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("hangs"))
def test_hangs_every_loop_bounded_and_no_fifo_opened(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("memory"))
def test_memory_of_the_whole_process_tree_within_1_gib(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("tracebacks"))
def test_tracebacks_become_one_line(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("short"))
def test_short_escaped_quiet_and_free_of_temporary_names(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


def test_the_catalogue_has_100_cases_over_seven_classes():
    assert len(CASES) >= 100 and {c.cls for c in CASES} == set(CLASSES)


def test_the_tree_sampler_sees_a_workers_memory(tmp_path):
    """The measure can fail: a grandchild holding 300 MiB must show in the tree's peak."""
    script = tmp_path / "grand.py"
    script.write_text("import subprocess, sys\nsubprocess.run([sys.executable, '-c', "
                      "'import numpy as np, time; a = np.ones(300 << 17); time.sleep(0.5); print(a.sum())'])\n")
    r = run_cli([], tmp_path, 60)   # python -m packing_core with no command: usage error, small
    assert r.rc == 2 and r.peak_mib < 300
    with tempfile.TemporaryDirectory() as tmp:
        launcher = subprocess.Popen([sys.executable, str(script)], cwd=tmp)
        proc, peak = psutil.Process(launcher.pid), 0
        while launcher.poll() is None:
            peak = max(peak, _tree_rss(proc))
            time.sleep(0.02)
    assert peak / 2**20 >= 300
