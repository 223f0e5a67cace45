"""Scan speed: fortunes texts replicated to a million documents, the local engine against datasets.map.

    python benchmarks/scan_speed.py                   # 1M documents, 2 workers, SmolLM2's tokenizer
    python benchmarks/scan_speed.py --json
    python benchmarks/scan_speed.py --docs 100000 --memory-docs 100000,1000000 --skip-datasets
    python benchmarks/scan_speed.py --chat-only --json   # only the chat case (20,000 conversations)

Four measurements:
- throughput: ``scan`` with the local engine against ``datasets.Dataset.map(batched=True,
  num_proc=2)`` computing the same lengths with the same tokenizer (the profiles must agree);
  the scan runs twice, with SmolLM2's word counter (the default) and with every text through
  the Rust tokenizer (``$PACKING_LAB_WORD_COUNTER=0``, ``--no-rust-only`` skips it); and the
  word counter alone, cold, on the distinct fortunes texts (a fresh cache, one process);
- memory: peak RSS of the scanning process and of its largest worker at each ``--memory-docs``
  size (each in a fresh subprocess), flat when nothing grows with the documents;
- planning from counts: bfd on the fortunes profile scaled to 1,000,000,000 documents;
- chat data (``--chat N``, default 20,000; 0 skips it): N conversations in a ``messages`` JSONL,
  built from the GSM8K questions and worked answers (a system prompt or none, one or two rounds,
  every question numbered so that no two conversations are equal), scanned with SmolLM2's chat
  template and the assistant-only loss tokens, beside ``datasets.map(apply_chat_template,
  num_proc=2)`` on the same file. The peer runs two ways: lengths alone (the goal's reference), and
  with ``return_assistant_tokens_mask`` on SmolLM2's template with ``{% generation %}`` around each
  answer and its end of turn (what TRL's ``assistant_only_loss`` reads). Both must give the
  lab's lengths and trained tokens; the lab (each scan in a fresh process, its worker start-up and
  tokenizer load on the clock; the peer's dataset and tokenizer loaded before it) must be at least
  ``CHAT_GOAL``x the faster peer, fastest run against fastest run (``--chat-repeat``, default 2).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import packing_core as pc
from packing_core.data import load_documents
from packing_core.models import PRETRAINED, ByteLevelCounter
from packing_lab.bench import load_average, machine_info

BLOCK = 1_000_000     # documents per block of shards; larger sets link the same block again
CHAT_GOAL = 2.0       # the chat scan's conversations/s against datasets.map(apply_chat_template, num_proc=2)
SYSTEM_PROMPTS = (None, "You are a patient maths tutor. Explain every step, then give the answer after ####.",
                  "Solve the problem.")


def write_block(folder: Path, docs: int, shards: int) -> list[Path]:
    """The fortunes texts repeated to ``docs`` documents, in ``shards`` Parquet files."""
    texts = np.array([d.text for d in load_documents("fortunes")], dtype=object)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, idx in enumerate(np.array_split(np.arange(docs), shards)):
        path = folder / f"part-{k:03d}.parquet"
        pq.write_table(pa.table({"text": texts[idx % len(texts)].tolist()}), path, row_group_size=16_384)
        paths.append(path)
    return paths


def corpus(folder: Path, docs: int, shards: int) -> Path:
    """A folder of ``docs`` documents: one written block, linked as often as needed."""
    block = write_block(folder / "block", min(docs, BLOCK), shards)
    if docs <= BLOCK:
        return folder / "block"
    out = folder / f"docs-{docs}"
    out.mkdir()
    for copy in range(docs // BLOCK):
        for p in block:
            (out / f"c{copy:03d}-{p.name}").symlink_to(p)
    return out


def _own_peak_mb() -> float:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the parent that forked us
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_scan(folder: str, workers: int, tokenizer: str) -> dict:
    """Scan an existing corpus in this (fresh) process; a thread samples the workers' RSS."""
    import psutil

    peaks = {"worker": 0, "all": 0}
    stop = threading.Event()

    def sample():
        me = psutil.Process()
        while not stop.wait(0.1):
            try:
                rss = [c.memory_info().rss for c in me.children(recursive=True)]
            except psutil.Error:
                continue
            peaks["worker"] = max(peaks["worker"], max(rss, default=0))
            peaks["all"] = max(peaks["all"], me.memory_info().rss + sum(rss))

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    start = time.perf_counter()
    profile = pc.scan([folder], functools.partial(pc.load_tokenizer, tokenizer), workers=workers)
    seconds = time.perf_counter() - start
    stop.set()
    watcher.join()
    return {"documents": profile.documents, "seconds": round(seconds, 2),
            "peak_rss_scan_process_mb": round(_own_peak_mb(), 1),
            "peak_rss_largest_worker_mb": round(peaks["worker"] / 2**20, 1),
            "peak_rss_all_processes_mb": round(peaks["all"] / 2**20, 1)}


def datasets_lengths(files: list[Path], tokenizer: str, workers: int, cache: Path) -> tuple[dict, float, float]:
    """The same lengths with ``datasets.Dataset.map(batched=True, num_proc=workers)``: (counts, load s, map s)."""
    import datasets

    hf = pc.load_tokenizer(tokenizer).hf
    datasets.disable_progress_bars()
    # one thread per process on both sides, as in the scan's workers: 2 processes on 2 cores
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    start = time.perf_counter()
    ds = datasets.Dataset.from_parquet([str(f) for f in files], cache_dir=str(cache))
    loaded = time.perf_counter()
    out = ds.map(lambda b: {"length": [len(ids) for ids in hf(b["text"], add_special_tokens=False)["input_ids"]]},
                 batched=True, num_proc=workers, remove_columns=["text"])
    lengths = np.asarray(out["length"], dtype=np.int64)
    seconds = time.perf_counter() - start
    values, counts = np.unique(lengths, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist())), loaded - start, seconds - (loaded - start)


def rust_only_scan(folder: Path, tokenizer: str, workers: int, expected) -> tuple[float, bool]:
    """The same scan with ``$PACKING_LAB_WORD_COUNTER=0``: every text through the Rust tokenizer."""
    old = os.environ.get("PACKING_LAB_WORD_COUNTER")
    os.environ["PACKING_LAB_WORD_COUNTER"] = "0"     # the spawned workers read it
    try:
        start = time.perf_counter()
        profile = pc.scan([folder], functools.partial(pc.load_tokenizer, tokenizer), workers=workers)
        return time.perf_counter() - start, profile.count_dict() == expected.count_dict()
    finally:
        if old is None:
            del os.environ["PACKING_LAB_WORD_COUNTER"]
        else:
            os.environ["PACKING_LAB_WORD_COUNTER"] = old


def cold_counter(tokenizer: str) -> dict | None:
    """One process, a fresh word cache, each distinct fortunes text once: the counter against encode_batch_fast."""
    tok = pc.load_tokenizer(tokenizer)
    fast = getattr(tok, "fast", None)
    counter = ByteLevelCounter.build(fast) if fast is not None else None
    if counter is None:
        return None
    texts = [d.text for d in load_documents("fortunes")]
    os.environ["TOKENIZERS_PARALLELISM"] = "false"   # one thread each, as in the scan's workers
    start = time.perf_counter()
    mine = [counter.count(t) for t in texts]
    counter_s = time.perf_counter() - start
    start = time.perf_counter()
    rust = [len(e) for e in fast.encode_batch_fast(texts, add_special_tokens=False)]
    rust_s = time.perf_counter() - start
    return {"texts": len(texts), "counted_by_the_counter": sum(n is not None for n in mine),
            "counter_seconds": round(counter_s, 3), "rust_seconds": round(rust_s, 3),
            "speedup": round(rust_s / counter_s, 2), "same": all(n is None or n == r for n, r in zip(mine, rust))}


def chat_conversations(n: int) -> list[list[dict]]:
    """``n`` distinct chats from the GSM8K test set: a system prompt (two of three), one or two rounds."""
    docs = load_documents("gsm8k")
    out = []
    for i in range(n):
        system = SYSTEM_PROMPTS[i % len(SYSTEM_PROMPTS)]
        messages = [] if system is None else [{"role": "system", "content": system}]
        for r in range(1 + (i % 4 == 3)):
            d = docs[(i + 611 * r) % len(docs)]
            messages += [{"role": "user", "content": f"Problem {i + 1}.{r + 1}: {d.prompt}"},
                         {"role": "assistant", "content": d.answer}]
        out.append(messages)
    return out


def tagged_template(template: str) -> str:
    """SmolLM2's template with ``{% generation %}`` around each answer and its end of turn.

    The lab trains an answer's tokens and the ``<|im_end|>`` + newline after it (rendered up to
    and including the turn, minus rendered up to it with the generation prompt).
    """
    answer = "message['content'] + '<|im_end|>' + '\n'"
    head = "{{'<|im_start|>' + message['role'] + '\n' + "
    if head + answer + "}}" not in template:
        raise SystemExit("SmolLM2's template changed: update tagged_template()")
    return template.replace(head + answer + "}}", "{{'<|im_start|>' + message['role'] + '\n'}}{% if message['role'] "
                            "== 'assistant' %}{% generation %}{{" + answer + "}}{% endgeneration %}{% else %}{{"
                            + answer + "}}{% endif %}")


def chat_peer(ds, hf, workers: int, masks: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """``datasets.map(apply_chat_template, batched=True, num_proc=workers)``: (lengths, trained, map seconds).

    The dataset and the tokenizer are loaded before the clock starts (as the text case does), and
    the map's cache is off, so that every run computes.
    """
    template = tagged_template(hf.chat_template) if masks else None

    def apply(batch):
        out = hf.apply_chat_template(batch["messages"], tokenize=True, chat_template=template,
                                     return_assistant_tokens_mask=masks)
        lengths = [len(ids) for ids in out["input_ids"]]
        return {"length": lengths, "trained": [sum(m) for m in out["assistant_masks"]] if masks else lengths}

    start = time.perf_counter()
    result = ds.map(apply, batched=True, num_proc=workers, remove_columns=ds.column_names, load_from_cache_file=False)
    lengths = np.asarray(result["length"], dtype=np.int64)
    trained = np.asarray(result["trained"], dtype=np.int64)
    return lengths, trained, time.perf_counter() - start


def chat_lab(path: Path, tokenizer: str, workers: int, out: Path) -> float:
    """One ``scan`` in a fresh process, as a program (the CLI) runs it once: its seconds, the profile in ``out``."""
    run = subprocess.run([sys.executable, __file__, "--chat-child", str(path), "--chat-out", str(out),
                          "--workers", str(workers), "--tokenizer", tokenizer], capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(run.stderr[-2000:])
    return json.loads(run.stdout.strip().splitlines()[-1])["seconds"]


def chat_child(path: str, out: str, workers: int, tokenizer: str) -> dict:
    scan = pc.scan   # the lab's modules imported first, as in a running program
    start = time.perf_counter()
    profile = scan([path], functools.partial(pc.load_tokenizer, tokenizer), workers=workers)
    seconds = time.perf_counter() - start
    profile.save(out)
    return {"seconds": seconds}


def chat_case(n: int, tokenizer: str, workers: int, repeat: int = 2) -> dict:
    """The chat scan beside the peer on the same ``n`` conversations, in one run: each side ``repeat``
    times, alternating, the fastest of each compared (the machine is shared: the slowest runs show the
    neighbours, not the code)."""
    import datasets

    convs = chat_conversations(n)
    load = load_average() or ()
    lab, peer, masked = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chats.jsonl"
        path.write_text("".join(json.dumps({"messages": m}) + "\n" for m in convs), encoding="utf-8")
        hf = pc.load_tokenizer(tokenizer).hf
        datasets.disable_progress_bars()
        os.environ["TOKENIZERS_PARALLELISM"] = "false"   # one thread per process on both sides
        ds = datasets.Dataset.from_json(str(path), cache_dir=str(Path(tmp) / "hf-cache"))
        for _ in range(repeat):
            lab.append(chat_lab(path, tokenizer, workers, Path(tmp) / "profile.json"))
            peer_l, _, seconds = chat_peer(ds, hf, workers, masks=False)
            peer.append(seconds)
            mask_l, mask_t, seconds = chat_peer(ds, hf, workers, masks=True)
            masked.append(seconds)
        profile = pc.LengthProfile.load(Path(tmp) / "profile.json")
    load = [*load, *(load_average() or ())]
    theirs = pc.LengthProfile.from_lengths(mask_l, mask_t, kind="messages")
    lab_s, peer_s, mask_s = min(lab), min(peer), min(masked)
    ratio = min(peer_s, mask_s) / lab_s
    return {"conversations": n, "file_mb": round(path_size_mb(convs), 1), "repeat": repeat,
            "lab_seconds": round(lab_s, 2), "lab_conversations_per_second": round(n / lab_s),
            "peer_seconds": round(peer_s, 2), "peer_conversations_per_second": round(n / peer_s),
            "peer_with_masks_seconds": round(mask_s, 2), "peer_with_masks_conversations_per_second": round(n / mask_s),
            "all_seconds": {"lab": [round(x, 2) for x in lab], "peer": [round(x, 2) for x in peer],
                            "peer_with_masks": [round(x, 2) for x in masked]},
            "ratio": round(ratio, 2), "goal": CHAT_GOAL, "verdict": "PASS" if ratio >= CHAT_GOAL else "FAIL",
            "tokens": profile.tokens, "trained_tokens": profile.trained_tokens,
            "same_lengths": profile.count_dict() == pc.LengthProfile.from_lengths(peer_l).count_dict(),
            "same_trained_tokens": bool(profile.loss_tokens is not None and theirs.loss_tokens is not None
                                        and np.array_equal(profile.lengths, theirs.lengths)
                                        and np.array_equal(profile.loss_tokens, theirs.loss_tokens)),
            "load_average_before_after": load}


def path_size_mb(convs: list[list[dict]]) -> float:
    return sum(len(json.dumps({"messages": m})) + 1 for m in convs) / 2**20


def bfd_billion(profile, context: int, rounds: int = 3) -> dict:
    scale = -(-10**9 // profile.documents)
    big = pc.LengthProfile(profile.lengths, profile.counts * scale)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        plan = pc.plan_from_counts(big, context, "bfd")
        best = min(best, time.perf_counter() - start)
    m = plan.metrics
    return {"documents": m.documents, "context": context, "seconds": round(best, 4), "rows": m.rows,
            "utilisation": round(m.utilisation, 5), "rows_over_lower_bound": round(m.rows_over_lower_bound, 6)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tokenizer", default=PRETRAINED)
    p.add_argument("--memory-docs", default="1000000,10000000", help="comma-separated sizes for the RSS runs")
    p.add_argument("--memory-tokenizer", default="bytes",
                   help="tokenizer of the RSS runs (bytes: 10M documents in minutes; the tokenizer's own memory is constant)")
    p.add_argument("--skip-datasets", action="store_true")
    p.add_argument("--rust-only", action=argparse.BooleanOptionalAction, default=True,
                   help="also time the scan with the word counter off ($PACKING_LAB_WORD_COUNTER=0)")
    p.add_argument("--memory-only", action="store_true", help="only the RSS runs and the 1e9 bfd")
    p.add_argument("--chat", type=int, default=20_000, help="conversations of the chat case (0: skip it)")
    p.add_argument("--chat-repeat", type=int, default=2, help="runs of each side of the chat case (the fastest counts)")
    p.add_argument("--chat-only", action="store_true", help="only the chat case")
    p.add_argument("--chat-child", help=argparse.SUPPRESS)
    p.add_argument("--chat-out", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child_scan(args.child, args.workers, args.tokenizer)))
        return 0
    if args.chat_child:
        print(json.dumps(chat_child(args.chat_child, args.chat_out, args.workers, args.tokenizer)))
        return 0
    if args.chat_only:
        chat = chat_case(args.chat, args.tokenizer, args.workers, args.chat_repeat)
        print(json.dumps({"chat": chat}, indent=2) if args.json else chat_line(chat, args.workers))
        return 0
    if args.memory_only:   # the 1e9 bfd still needs a real fortunes profile: count it with bytes, fast
        args.tokenizer, args.skip_datasets = "bytes", True
    machine = machine_info()
    result: dict = {"docs": args.docs, "workers": args.workers, "tokenizer": args.tokenizer,
                    "memory_tokenizer": args.memory_tokenizer}
    with tempfile.TemporaryDirectory() as tmp:
        folder = corpus(Path(tmp), args.docs, args.shards)
        start = time.perf_counter()
        profile = pc.scan([folder], functools.partial(pc.load_tokenizer, args.tokenizer), workers=args.workers)
        scan_s = time.perf_counter() - start
        result["scan"] = {"seconds": round(scan_s, 2), "docs_per_second": round(profile.documents / scan_s),
                          "tokens": profile.tokens}
        result["word_counter_cold"] = cold_counter(args.tokenizer) if args.tokenizer != "bytes" else None
        if args.rust_only and args.tokenizer != "bytes":
            rust_s, same = rust_only_scan(folder, args.tokenizer, args.workers, profile)
            result["scan_rust_only"] = {"seconds": round(rust_s, 2), "docs_per_second": round(profile.documents / rust_s),
                                        "same_profile": same}
        if not args.skip_datasets:
            counts, load_s, map_s = datasets_lengths(sorted(folder.glob("*.parquet")), args.tokenizer, args.workers,
                                                     Path(tmp) / "hf-cache")
            result["datasets_map"] = {"seconds": round(map_s, 2), "docs_per_second": round(profile.documents / map_s),
                                      "from_parquet_seconds": round(load_s, 2), "same_lengths": counts == profile.count_dict()}
            result["speedup"] = round(map_s / scan_s, 2)   # map alone: the Parquet -> Arrow load not counted
            if "scan_rust_only" in result:
                result["speedup_rust_only"] = round(map_s / result["scan_rust_only"]["seconds"], 2)
    result["memory"] = []   # each entry: one scan in a fresh process, --memory-tokenizer
    for n in (int(x) for x in args.memory_docs.split(",") if x):
        with tempfile.TemporaryDirectory() as tmp:
            folder = corpus(Path(tmp), n, args.shards)      # written here, scanned in a fresh process
            run = subprocess.run([sys.executable, __file__, "--child", str(folder), "--workers", str(args.workers),
                                  "--tokenizer", args.memory_tokenizer], capture_output=True, text=True, check=True)
        result["memory"].append(json.loads(run.stdout.strip().splitlines()[-1]))
    result["bfd_1e9"] = bfd_billion(profile, 512)
    if args.chat and args.tokenizer != "bytes":
        result["chat"] = chat_case(args.chat, args.tokenizer, args.workers, args.chat_repeat)
    result["machine"] = machine.finished().to_dict()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        s = result["scan"]
        print(f"scan, local engine, {args.workers} workers, {args.tokenizer}: {args.docs:,} documents in "
              f"{s['seconds']} s ({s['docs_per_second']:,} documents/s)")
        if result.get("word_counter_cold"):
            c = result["word_counter_cold"]
            print(f"word counter, cold cache, {c['texts']:,} distinct texts ({c['counted_by_the_counter']:,} ASCII): "
                  f"{c['counter_seconds']} s against encode_batch_fast {c['rust_seconds']} s, {c['speedup']}x, "
                  f"same counts: {c['same']}")
        if "scan_rust_only" in result:
            r = result["scan_rust_only"]
            print(f"the same scan, every text through the Rust tokenizer: {r['seconds']} s "
                  f"({r['docs_per_second']:,} documents/s), same profile: {r['same_profile']}")
        if "datasets_map" in result:
            d = result["datasets_map"]
            print(f"datasets.map(batched=True, num_proc={args.workers}): {d['seconds']} s "
                  f"({d['docs_per_second']:,} documents/s; from_parquet before it {d['from_parquet_seconds']} s), "
                  f"same lengths: {d['same_lengths']}; scan / map throughput {result['speedup']}x")
            if "speedup_rust_only" in result:
                print(f"scan / map throughput with the word counter off: {result['speedup_rust_only']}x")
        for m in result["memory"]:
            print(f"peak RSS at {m['documents']:,} documents ({args.memory_tokenizer} tokenizer): scan process "
                  f"{m['peak_rss_scan_process_mb']} MB, largest worker {m['peak_rss_largest_worker_mb']} MB, "
                  f"all together {m['peak_rss_all_processes_mb']} MB ({m['seconds']} s)")
        print(machine.finished().line())
        b = result["bfd_1e9"]
        print(f"bfd from counts, {b['documents']:,} documents at context {b['context']}: {b['seconds']} s, "
              f"{b['rows']:,} rows, utilisation {b['utilisation']}, {b['rows_over_lower_bound']}x the lower bound")
        if "chat" in result:
            print(chat_line(result["chat"], args.workers))
    return 0


def chat_line(c: dict, workers: int) -> str:
    return (f"chat, {c['conversations']:,} conversations ({c['file_mb']} MB messages JSONL), fastest of {c['repeat']} "
            f"runs each: scan {c['lab_seconds']} s "
            f"({c['lab_conversations_per_second']:,} conversations/s); datasets.map(apply_chat_template, "
            f"num_proc={workers}) {c['peer_seconds']} s ({c['peer_conversations_per_second']:,}/s), with "
            f"return_assistant_tokens_mask {c['peer_with_masks_seconds']} s "
            f"({c['peer_with_masks_conversations_per_second']:,}/s); scan / faster peer {c['ratio']}x "
            f"(goal >= {c['goal']}x): {c['verdict']}; same lengths: {c['same_lengths']}, same trained tokens: "
            f"{c['same_trained_tokens']}; load average (1, 5, 15 min) before {c['load_average_before_after'][:3]}, "
            f"after {c['load_average_before_after'][3:]}")


if __name__ == "__main__":
    sys.exit(main())
