"""The model registry and the one tokenizer loader: every model and tokenizer choice is read from one place."""
import ast
import io
import json
from pathlib import Path

import pytest

import packing_core as pc
from packing_core.cli import main
from packing_core.data import byte_tokenizer
from packing_core.models import pretrained, pretrained_status, tokenizers
from packing_core.models.registry import (
    PRETRAINED,
    ModelSpec,
    find_model,
    model_names,
    model_specs,
    register_model,
    unregister_model,
)
from packing_core.models.tiny import tiny_model
from packing_core.models.tokenizers import TOKENIZER_CHOICES, HFTokenizer, load_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def _toy_load(dtype=None, device=None):
    return tiny_model("tiny-rope", seed=3), None


@pytest.fixture
def toy_model():
    spec = register_model(ModelSpec("toy-tiny", "toy: a reseeded tiny model", _toy_load, tokenizer=False))
    yield spec
    unregister_model(spec.name)


def test_every_spec_says_what_a_picker_shows_and_how_it_runs():
    for s in model_specs():
        assert s.label and callable(s.load) and callable(s.available)
        assert json.dumps(s.to_dict())
        assert bool(s.default_texts) <= s.tokenizer   # default texts only for a model that can read them
    assert model_names(tokenizer=True) == (PRETRAINED,)


def test_the_pretrained_name_is_written_in_one_place():
    """No module or page compares or passes the literal model name: they read PRETRAINED."""
    files = [*(ROOT / "packing_core").rglob("*.py"), *(ROOT / "app_pages").glob("*.py"), ROOT / "app.py",
             *(ROOT / "benchmarks").glob("*.py")]
    hits = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in files if p.name != "_settings.py"
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and node.value == PRETRAINED]
    assert hits == []


def test_a_registered_model_reaches_verify_the_cli_and_the_leakage_lab(toy_model):
    from streamlit.testing.v1 import AppTest

    report = pc.verify_model(toy_model.name, mask="off")
    assert report.model == toy_model.name and not report.equivalent
    out, err = io.StringIO(), io.StringIO()
    assert main(["verify", "--model", toy_model.name, "--format", "json"], out=out, err=err) == 0, err.getvalue()
    assert json.loads(out.getvalue())["model"] == toy_model.name
    at = AppTest.from_file("../../app.py", default_timeout=120)
    at.switch_page("app_pages/leakage_lab.py").run()
    box = at.selectbox(key="w_leakage_lab.model")
    assert find_model(toy_model.name).label in box.options    # the picker shows the spec's label
    box.set_value(toy_model.name).run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    assert at.session_state["leakage_lab.model"] == toy_model.name


def test_an_unknown_model_is_one_line_naming_the_registered_ones():
    err = io.StringIO()
    assert main(["verify", "--model", "tiny-ropee"], out=io.StringIO(), err=err) == 2
    assert "unknown model 'tiny-ropee'" in err.getvalue() and all(n in err.getvalue() for n in model_names())


@pytest.mark.parametrize("command", ["report", "scan"])
def test_report_and_scan_take_the_same_tokenizer_choices(command, tmp_path):
    args = {"report": ["report", "--lengths", "3,4"], "scan": ["scan", str(tmp_path / "none"), "--out",
                                                               str(tmp_path / "p.json")]}[command]
    err = io.StringIO()
    assert main([*args, "--tokenizer", "no-such-tokenizer"], out=io.StringIO(), err=err) == 2
    assert "neither a built-in (auto, smollm2, bytes) nor an existing folder" in err.getvalue()
    for choice in TOKENIZER_CHOICES:   # accepted: report goes on to plan; scan then finds no input
        err = io.StringIO()
        main([*args, "--tokenizer", choice], out=io.StringIO(), err=err)
        assert "neither a built-in" not in err.getvalue()


def test_auto_is_bytes_when_the_pretrained_model_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(pretrained, "GGUF_PACKAGE", "no_such_model_package")
    tokenizers.real_tokenizer.cache_clear()
    try:
        assert load_tokenizer("auto") is byte_tokenizer
        with pytest.raises(ValueError, match="needs the pretrained model"):
            load_tokenizer(PRETRAINED)
    finally:
        tokenizers.real_tokenizer.cache_clear()


def test_one_wrapper_class_for_the_pretrained_tokenizer():
    if not pretrained_status()[0]:
        pytest.skip("SmolLM2 is not installed: bash scripts/install.sh")
    by_name, auto, real = load_tokenizer(PRETRAINED), load_tokenizer("auto"), tokenizers.real_tokenizer()
    assert all(isinstance(t, HFTokenizer) for t in (by_name, auto, real))
    texts = ["Hello world", "café au lait"]
    assert by_name(texts) == auto(texts) == real(texts)
    assert by_name.decode(by_name(["Hello world"])[0]) == "Hello world"
