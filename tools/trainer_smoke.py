"""What a trainer's environment gets from ``pip install packing-lab``: run in that environment, it prints JSON.

    python tools/trainer_smoke.py                 # in the trainer's environment, after pip install <checkout>
    python tools/trainer_smoke.py --block         # here too, with the optional packages made missing
    python tools/trainer_smoke.py --trl           # and a real TRL SFTTrainer run with PackingCheckCallback

Each check is one entry ``{"name", "ok", "detail"}``; the script exits 1 if any failed. The checks:
the ``packing-lab`` command's help; ``report --lengths``; ``scan`` of a text file; a static ``check`` of a batch file it
writes (a padding-free batch that is sound, and one with an all-ones mask that leaks under sdpa);
``import packing_core.integrations`` with the optional packages (streamlit, plotly, pandas,
pyarrow, highspy, ray) not loaded; the guard on a tiny random-init Llama (for speed) stopping a
leaking batch; with ``--trl``, the callback stopping a real ``SFTTrainer`` run on TRL's ``wrapped``
packing and passing its ``bfd``. ``--block`` puts ``None`` in ``sys.modules`` for the optional
packages first, which is how Python reports a package that is not installed
(``importlib.util.find_spec`` returns None and ``import`` raises ``ModuleNotFoundError``).

It imports nothing of the lab beyond the installed ``packing_core`` and the ``packing-lab`` command.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
from pathlib import Path

OPTIONAL = ("streamlit", "plotly", "pandas", "pyarrow", "highspy", "ray")
EOS = 2


def _cli(*argv: str) -> tuple[int, str, str]:
    """``packing-lab ARGV`` in this process: (exit code, stdout, stderr); ``--help`` exits as argparse does."""
    from contextlib import redirect_stdout

    from packing_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out):
        try:
            code = main(list(argv), out, err)
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def _batches(folder: Path) -> tuple[Path, Path]:
    import torch
    from safetensors.torch import save_file

    ids = torch.tensor([[5, 6, EOS, 7, 8, 9, EOS, 10, 11, EOS]])
    pos = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 0, 1, 2]])
    labels = ids.clone()
    labels[pos == 0] = -100
    sound, leaking = folder / "sound.safetensors", folder / "leaking.safetensors"
    save_file({"input_ids": ids, "position_ids": pos, "labels": labels}, str(sound))
    save_file({"input_ids": ids, "position_ids": pos, "labels": labels,
               "attention_mask": torch.ones_like(ids)}, str(leaking))
    return sound, leaking


def _tiny_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                      pad_token_id=0, eos_token_id=EOS, bos_token_id=1)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg)


def checks(trl: bool = False) -> list[dict]:
    found: list[dict] = []

    def record(name: str, ok: bool, detail: str = "") -> None:
        found.append({"name": name, "ok": bool(ok), "detail": detail[:400]})

    import packing_core  # noqa: F401
    import packing_core.check  # noqa: F401
    import packing_core.integrations as integrations

    integrations.guard, integrations.PackingCheckCallback  # noqa: B018  (load them, as a trainer does)
    loaded = [m for m in OPTIONAL if sys.modules.get(m) is not None]
    record("import packing_core, .check, .integrations loads no optional package", not loaded, f"loaded: {loaded}")

    code, out, err = _cli("--help")
    record("packing-lab --help", code == 0 and "check" in out and "report" in out, err)
    code, out, err = _cli("report", "--lengths", "120,90,300,40,55,30,210,65", "--context", "512")
    record("packing-lab report --lengths", code == 0 and "bfd" in out, err or out[-200:])

    with tempfile.TemporaryDirectory() as tmp:
        texts = Path(tmp) / "texts.txt"
        texts.write_text("one short document\n\nand a second one\r\n", encoding="utf-8")
        code, out, err = _cli("scan", str(texts), "--tokenizer", "bytes", "--out", str(Path(tmp) / "p.json"))
        counts = json.loads((Path(tmp) / "p.json").read_text())["counts"] if code == 0 else None
        record("packing-lab scan of a text file", counts == {"18": 1, "16": 1}, err or str(counts))
        sound, leaking = _batches(Path(tmp))
        code, out, err = _cli("check", str(sound), "--attn-implementation", "sdpa")
        record("packing-lab check (sound padding-free batch)", code == 0 and "SOUND" in out, err or out[-300:])
        code, out, err = _cli("check", str(leaking), "--attn-implementation", "sdpa")
        record("packing-lab check (all-ones mask: leaks under sdpa)",
               code == 1 and "documents_share_attention" in out, err or out[-300:])

    from packing_core.integrations import PackingCheckError, guard

    model = _tiny_llama()
    guard(model, batches=1)
    import torch

    try:
        # documents marked by position resets, and an all-ones 2D mask that turns sdpa's packed detection off
        model(input_ids=torch.tensor([[5, 6, EOS, 7, 8, 9]]), position_ids=torch.tensor([[0, 1, 2, 0, 1, 2]]),
              attention_mask=torch.ones(1, 6, dtype=torch.long), use_cache=False)
        record("guard stops a leaking batch", False, "no PackingCheckError")
    except PackingCheckError as e:
        record("guard stops a leaking batch", "documents_share_attention" in str(e), str(e).splitlines()[0])
    if trl:
        found.extend(_trl_checks())
    return found


def _trl_checks() -> list[dict]:
    """A real SFTTrainer run, two steps, with the callback: TRL's ``wrapped`` packing leaks, its ``bfd`` does not."""
    import numpy as np
    import transformers
    import trl
    from datasets import Dataset
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    from packing_core.integrations import PackingCheckCallback, PackingCheckError

    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": EOS, **{f"w{i}": i for i in range(3, 64)}}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="<pad>")))
    tok.add_special_tokens({"pad_token": "<pad>", "eos_token": "<eos>", "bos_token": "<bos>"})
    rng = np.random.default_rng(0)
    docs = [[int(t) for t in rng.integers(3, 64, int(n))] + [EOS] for n in rng.integers(3, 9, 24)]
    versions = f"transformers {transformers.__version__}, trl {trl.__version__}"
    results = []
    for strategy, should_stop in (("wrapped", True), ("bfd", False)):
        with tempfile.TemporaryDirectory() as out:
            args = trl.SFTConfig(output_dir=out, max_steps=2, per_device_train_batch_size=2, packing=True,
                                 packing_strategy=strategy, max_length=16, report_to="none", use_cpu=True,
                                 save_strategy="no", dataloader_num_workers=0, learning_rate=1e-3)
            callback = PackingCheckCallback(batches=2)
            trainer = trl.SFTTrainer(model=_tiny_llama(), args=args, processing_class=tok, callbacks=[callback],
                                     train_dataset=Dataset.from_dict({"input_ids": docs}))
            try:
                trainer.train()
                checked = len(callback.guard.checks) if callback.guard is not None else 0   # made at on_train_begin
                stopped, detail = False, f"{checked} batch(es) checked, all sound"
            except PackingCheckError as e:
                stopped, detail = True, str(e).splitlines()[0]
        results.append({"name": f"SFTTrainer packing_strategy={strategy!r} with PackingCheckCallback "
                                f"({'stops' if should_stop else 'passes'}; {versions})",
                        "ok": stopped == should_stop, "detail": detail[:400]})
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--block", action="store_true", help="make the optional packages missing first")
    p.add_argument("--trl", action="store_true", help="also run a real TRL SFTTrainer with the callback")
    args = p.parse_args(argv)
    if args.block:
        for name in OPTIONAL:
            sys.modules[name] = None  # type: ignore[assignment]  # how Python marks a module as not installed
    found = checks(trl=args.trl)
    print(json.dumps({"python": sys.version.split()[0], "checks": found}, indent=1))
    return 0 if all(c["ok"] for c in found) else 1


if __name__ == "__main__":
    sys.exit(main())
