"""The command line, run as a user runs it: a subprocess, exit codes, stdout and stderr."""
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packing_core.cli import main
from packing_core.packing.registry import DEFAULT_STRATEGIES, STRATEGIES
from tests._support import skip_or_fail

ROOT = Path(__file__).resolve().parents[1]
WORKED = "120,90,300,40,55,30,210,65"


def run(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "packing_core", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_report_json_has_one_object_per_strategy_with_the_worked_example_numbers():
    r = run("report", "--lengths", WORKED, "--context", "512", "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["report_version"] == 2
    rows = {x["strategy"]: x for x in report["strategies"]}
    assert list(rows) == list(DEFAULT_STRATEGIES)  # every strategy but those run on request, in the registry's order
    assert "optimal" in STRATEGIES and "optimal" not in rows
    required = {"strategy", "rows", "slots", "real_tokens", "pad_tokens", "utilisation", "tokens_lost",
                "docs_split", "attention_cost_padded", "attention_cost_packed", "bound", "bound_rows", "bounds"}
    assert required <= set(rows["pad"])
    assert (rows["pad"]["slots"], round(rows["pad"]["utilisation"], 3)) == (4096, 0.222)
    assert (rows["concat-cut"]["rows"], rows["concat-cut"]["slots"]) == (2, 1024)
    assert round(rows["concat-cut"]["utilisation"], 3) == 0.889
    assert rows["bfd"]["bound_rows"] == 2 and rows["bfd"]["bound"] in ("L2", "LP")   # 910 tokens: 2 rows at best


def test_report_table_for_one_strategy_on_a_synthetic_set():
    r = run("report", "--synthetic", "support-tickets", "--strategy", "bfd")
    assert r.returncode == 0, r.stderr
    assert "200,000 documents" in r.stdout
    assert r.stdout.count("bfd") >= 2  # the table row and its description


def test_report_reads_a_real_parquet_length_column(tmp_path):
    path = tmp_path / "lengths.parquet"
    pq.write_table(pa.table({"n_tokens": [120, 90, 300, 40, 55, 30, 210, 65]}), path)
    r = run("report", str(path), "--column", "n_tokens", "--strategy", "concat-cut", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["strategies"][0]["slots"] == 1024


@pytest.mark.parametrize(
    "args, words",
    [
        (["report", "--lengths", "10,abc"], "abc"),
        (["report", "--lengths", "10,-4"], "-4"),
        (["report", "--lengths", "10,0"], "0"),
        (["report", "--lengths", "1.5,2"], "1.5"),
        (["report", "--lengths", ""], "no lengths"),
        (["report", "--lengths", "10", "--context", "0"], "context"),
        (["report", "--lengths", "10", "--strategy", "magic"], "magic"),
        (["report", "no/such/file.csv"], "file.csv"),
        (["report", "--synthetic", "nope"], "nope"),
        (["report"], "no data given"),
        (["report", "--lengths", "10", "--time-limit", "0"], "0.0"),
        (["report", "--lengths", "10", "--time-limit", "-1"], "-1.0"),
        (["report", "--lengths", "10", "--time-limit", "1e9"], "1000000000.0"),
        (["report", "--lengths", "10", "--time-limit", "nan"], "nan"),
        (["report", "--lengths", "10", "--max-docs-per-row", "0"], "got 0"),
        (["report", "--lengths", "10", "--max-docs-per-row", "-2"], "got -2"),
        (["report", "--lengths", "10", "--max-docs-per-row", "513"], "at most the context (512)"),
        (["report", "--lengths", "10", "--strategy", "concat-cut", "--max-docs-per-row", "4"], "cannot hold"),
        (["verify", "--mask", "maybe"], "maybe"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_bad_input_prints_one_error_line_and_exits_2(args, words):
    r = run(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], r.stderr


def test_unknown_column_names_the_columns_that_exist(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,text\n1,hello\n2,world\n")
    r = run("report", str(path), "--column", "body")
    assert r.returncode == 2 and "body" in r.stderr and "text" in r.stderr and "Traceback" not in r.stderr


def test_verify_with_the_mask_on_exits_0_and_reports_every_document_the_same():
    r = run("verify", "--model", "tiny-rope", "--mask", "on", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["equivalent"] is True


def test_verify_with_the_mask_off_exits_1_and_names_the_later_documents():
    r = run("verify", "--model", "tiny-abs", "--mask", "off")
    assert r.returncode == 1, r.stderr
    assert "NOT EQUIVALENT" in r.stdout and "Document(s) 1, 2" in r.stdout


def test_verify_continuous_positions_break_absolute_embeddings_but_not_rope():
    assert run("verify", "--model", "tiny-abs", "--positions", "continuous").returncode == 1
    assert run("verify", "--model", "tiny-rope", "--positions", "continuous").returncode == 0


def test_verify_varlen_on_a_cpu_machine_says_which_backend_to_use():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: varlen is available")
    r = run("verify", "--backend", "varlen")
    assert r.returncode == 2 and "segments" in r.stderr and "Traceback" not in r.stderr


def test_text_column_lengths_follow_the_chosen_tokenizer(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text\nhello world\ncafé au lait\n", encoding="utf-8")
    r = run("report", str(path), "--strategy", "pad", "--format", "json", "--tokenizer", "bytes")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["strategies"][0]["real_tokens"] == len(b"hello world") + len("café au lait".encode())
    from packing_core.models.tokenizers import real_tokenizer

    tok = real_tokenizer()
    if tok is None:
        skip_or_fail("SmolLM2 is not installed: bash scripts/install.sh")
    r = run("report", str(path), "--strategy", "pad", "--format", "json", "--tokenizer", "smollm2")
    assert json.loads(r.stdout)["strategies"][0]["real_tokens"] == sum(map(len, tok(["hello world", "café au lait"])))


def test_a_reader_that_goes_away_is_not_reported_as_an_error():
    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    err = io.StringIO()
    assert main(["report", "--lengths", "120,90,300"], out=ClosedPipe(), err=err) == 141   # 128 + SIGPIPE
    assert "error" not in err.getvalue()


def call(*argv) -> tuple[int, str, str]:
    """The CLI in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def test_the_package_docstring_names_every_command_and_each_has_its_module():
    import packing_core.cli as cli
    from packing_core.cli.dispatch import COMMANDS, parser

    folder = ROOT / "packing_core" / "cli"
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "common", "dispatch"}
    assert [c.NAME for c in COMMANDS][:2] == ["report", "balance"] and {c.NAME for c in COMMANDS} == modules
    for c in COMMANDS:
        assert f"    {c.NAME} " in cli.__doc__ and f"{c.NAME}.py" in cli.__doc__, c.NAME     # the table lists it
        assert c.__name__ == f"packing_core.cli.{c.NAME}" and c.HELP and callable(c.run)
        assert parser(c.NAME).parse_args([c.NAME, *{"scan": ["x", "--out", "y"], "check": ["b.json"],
                                                    "balance": ["--ranks", "2"]}.get(c.NAME, [])]).command == c.NAME




def test_too_few_rows_get_one_answer_in_the_cli_and_the_library_fitted_and_said_so():
    from packing_core.packing.balance import balance_steps
    from packing_core.packing.strategies import make_plan

    steps = balance_steps(make_plan([100, 200, 300], 512, "bfd"), 8, 4, fit=True)
    code, out, _ = call("balance", "--lengths", "100,200,300", "--ranks", "8", "--micro-batches", "4", "--format", "json")
    got = json.loads(out)
    assert code == 0 and (got["ranks"], got["micro_batches"], got["note"]) == (steps.ranks, steps.micro_batches,
                                                                              steps.note)
    assert (steps.ranks, steps.micro_batches) == (2, 1) and "cannot fill one step of 8 ranks x 4" in steps.note
    with pytest.raises(ValueError, match="cannot fill"):        # without fit, the library refuses
        balance_steps(make_plan([100, 200, 300], 512, "bfd"), 8, 4)


def test_report_file_checks_the_tokenizer_once(tmp_path, monkeypatch):
    import packing_core.models.tokenizers as tokenizers

    calls = []
    real = tokenizers.check_tokenizer
    monkeypatch.setattr(tokenizers, "check_tokenizer", lambda spec: (calls.append(spec), real(spec))[1])
    path = tmp_path / "t.csv"
    path.write_text("text\nhello world\nanother line\n")
    code, out, err = call("report", str(path), "--tokenizer", "bytes", "--format", "json")
    assert code == 0, err
    assert calls == ["bytes"]


def test_plain_report_and_report_file_write_one_table_with_the_same_columns(tmp_path):
    from packing_core.analysis.columns import COLUMNS

    path = tmp_path / "l.csv"
    path.write_text("length\n" + "\n".join(WORKED.split(",")) + "\n")
    _, plain, _ = call("report", "--lengths", WORKED)
    _, from_file, _ = call("report", str(path))
    from packing_core import LengthProfile

    LengthProfile.from_lengths([int(n) for n in WORKED.split(",")], kind="lengths").save(path.with_suffix(".json"))
    _, from_profile, _ = call("report", "--profile", str(path.with_suffix(".json")))
    header = lambda text: next(line.split() for line in text.splitlines() if line.startswith("strategy "))
    every = " ".join(c.text for c in COLUMNS if c.text).split()
    assert header(plain) == header(from_file) == header(from_profile) == every      # one pipeline, one table
    from packing_core.packing import STRATEGY_INFO

    row = lambda text, name: next(line.split() for line in text.splitlines() if line.startswith(name + " "))
    for text in (plain, from_file, from_profile):   # the same legend, one line per strategy, the same plans
        assert "L1 = tokens / context, rounded up,\nis reachable only by cutting documents" in text
        assert "fewest" not in text
        assert all(f"  {name}: {STRATEGY_INFO[name]}" in text for name in DEFAULT_STRATEGIES)
        assert row(text, "bfd")[2:] == row(plain, "bfd")[2:] and row(text, "bfd")[1] in ("counts", "ordered")
    assert row(plain, "next-fit")[1] == "ordered"       # typed lengths: every plan in the order given


def test_verify_takes_the_labs_backends_and_transformers_attention_each_in_its_own_flag():
    code, _, err = call("verify", "--model", "tiny-rope", "--attn-implementation", "sdpa")
    assert code == 2 and "tiny model: it runs the lab's backends" in err and "sdpa" in err
    code, _, err = call("verify", "--attn-implementation", "segments")
    assert code == 2 and "invalid choice: 'segments'" in err
    code, out, err = call("verify", "--model", "tiny-rope", "--backend", "dense", "--format", "json")
    assert code == 0 and err == "" and json.loads(out)["backend"] == "dense"


def test_verify_backend_with_a_transformers_name_is_one_line_naming_the_flag_it_belongs_to():
    code, _, err = call("verify", "--model", "tiny-rope", "--backend", "flash_attention_2")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: argument --backend:") and "pass --attn-implementation flash_attention_2" in err


TEN_OF_300 = ",".join(["300"] * 10)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_report_names_the_bound_each_strategy_can_reach_and_never_calls_l1_the_fewest(fmt):
    # 3,000 tokens: ceil(3000 / 512) = 6 rows only if documents are cut; no two 300s share a row: 10 whole rows
    code, out, err = call("report", "--lengths", TEN_OF_300, "--format", fmt, "--optimal")
    assert code == 0, err
    assert "fewest" not in out
    if fmt == "json":
        d = json.loads(out)
        assert (d["bounds"]["l1"]["rows"], d["bounds"]["l2"]["rows"], d["bounds"]["whole_documents"]) == (6, 10, "L2")
        by = {e["strategy"]: e for e in d["strategies"]}
        assert (by["concat-cut"]["bound"], by["concat-cut"]["bound_rows"], by["concat-cut"]["rows"]) == ("L1", 6, 6)
        assert all(by[s]["bound"] == "L2" and by[s]["bound_rows"] == 10 == by[s]["rows"] for s in ("bfd", "optimal"))
        assert d["optimal_gap"]["gap_rows"] == 0
        return
    table = out.split("\n\n")[1].splitlines()
    cells = {line.split()[0]: line.split()[3:5] for line in table[1:]}
    assert table[0].split()[3:5] == ["bound", "rows/bound"]
    assert cells["concat-cut"] == ["L1", "6"] and cells["bfd"] == cells["optimal"] == ["L2", "10"]
    assert ("lower bounds on rows: L1 6 (tokens / context: a bound for every plan, reachable only by cutting "
            "documents), L2 10 (whole documents)") in out


def test_a_cap_per_row_plans_every_strategy_that_can_hold_it_and_prices_it_for_bfd():
    lengths = ",".join(["10"] * 9)          # nine 10-token documents: one row, or three with at most 4 a row
    code, out, err = call("report", "--lengths", lengths, "--max-docs-per-row", "4", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["max_docs_per_row"] == 4
    assert "concat-cut" not in [e["strategy"] for e in d["strategies"]]
    assert {e["strategy"]: e["rows"] for e in d["strategies"]}["bfd"] == 3
    assert (d["cap_price"]["rows"], d["cap_price"]["rows_uncapped"], d["cap_price"]["extra_rows"]) == (3, 1, 2)
    code, out, err = call("report", "--lengths", lengths, "--max-docs-per-row", "4")
    assert code == 0, err
    assert "concat-cut left out: it cuts documents at row edges" in out
    assert "A cap of 4 documents per row costs bfd 2 rows (200%): 3 rows instead of 1." in out


def test_a_time_limit_reaches_optimal_and_a_tiny_one_still_returns_a_plan_with_its_gap():
    code, out, err = call("report", "--synthetic", "support-tickets", "--strategy", "optimal", "--time-limit",
                          "0.001", "--format", "json")
    assert code == 0, err
    cert = json.loads(out)["strategies"][0]["certificate"]
    assert cert["time_limit"] == 0.001 and cert["rows"] >= cert["bound"]["rows"]
    assert cert["status"] == "optimal (proven)" if cert["gap_rows"] == 0 else cert["status"].startswith(
        f"gap {cert['gap_rows']:,} row")
    assert "seconds" not in cert         # the JSON is a function of the input: no timings in it
