"""The classroom's readiness: the thread count, the demo pair cached on disk, the warm status."""
import importlib
import threading

import pytest
import torch

W = importlib.import_module("packing_lab.demos.warm")   # the module (the package's name `warm` is its function)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(W, "_memo", {})
    return tmp_path


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_the_lab_runs_torch_on_one_thread_unless_told_otherwise(monkeypatch, restore_threads):
    monkeypatch.delenv(W.THREADS_ENV, raising=False)
    assert W.use_lab_threads() == 1 and torch.get_num_threads() == 1
    monkeypatch.setenv(W.THREADS_ENV, "2")
    assert W.use_lab_threads() == 2 and torch.get_num_threads() == 2


def test_a_thread_started_after_the_setting_runs_with_it(restore_threads):
    """What the app relies on: Streamlit runs each rerun on a new thread (ATen's lazy_init_num_threads)."""
    torch.set_num_threads(2)
    W.use_lab_threads()
    seen = []

    def work():
        torch.ones(1000).sum()     # a first op initialises the thread's count
        seen.append(torch.get_num_threads())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [1]


@pytest.mark.parametrize("raw", ["two", "0", "-1", "1.5"])
def test_a_bad_thread_setting_is_one_line_naming_it(monkeypatch, raw):
    monkeypatch.setenv(W.THREADS_ENV, raw)
    with pytest.raises(ValueError, match=f"PACKING_LAB_TORCH_THREADS={raw!r}.*whole number"):
        W.lab_threads()


def test_an_unknown_neighbours_setting_is_refused_before_any_training(fresh_cache):
    with pytest.raises(ValueError, match="neighbours must be one of related, independent"):
        W.train_pair(0, "sorted")


def test_the_demo_pair_trains_once_then_comes_from_the_disk_with_the_same_numbers(fresh_cache, monkeypatch):
    shares = []
    on, off = W.train_pair(5, "related", progress=lambda share, what: shares.append(share))
    assert shares == sorted(shares) and shares[-1] == pytest.approx(1.0) and len(shares) >= 10
    assert (on.mask, off.mask) == ("on", "off")
    monkeypatch.setattr(W, "_memo", {})               # a new server process: only the disk remains
    monkeypatch.setattr(W, "train_demo", lambda *a, **k: pytest.fail("trained again instead of reading the cache"))
    again = W.train_pair(5, "related")
    assert again == (on, off)


def test_a_changed_training_code_never_reads_an_old_result(fresh_cache, monkeypatch):
    path = W._demo_path(0, "related")
    path.parent.mkdir(parents=True)
    path.write_text("[]")                              # a broken file counts as absent
    assert W.cached_pair(0, "related") is None
    monkeypatch.setattr(W, "_fingerprint", lambda: "another-code")
    assert W._demo_path(0, "related") != path


def test_the_status_says_cold_and_names_the_command_until_warm_has_run(fresh_cache):
    status = W.warm_status()
    assert not status.model_converted and not status.demo_trained
    assert status.line.startswith("Server cold") and "packing-lab warm" in status.line


def test_warm_runs_every_step_and_tokenises_each_available_dataset(fresh_cache, monkeypatch):
    """The whole ``warm_server()`` path, imports included (a moved import once broke it after the model step).

    The model conversion and the training have their own tests and take a minute here, so this one
    stands in their results: SmolLM2 counts as absent and the demo pair as cached. The datasets step
    runs for real, with the tokenizer ``auto`` resolves to.
    """
    import packing_core.models.pretrained as pretrained
    from packing_core.data import list_sources

    monkeypatch.setattr(W, "smollm2_converted", lambda: False)
    monkeypatch.setattr(pretrained, "_gguf_folder", lambda: None)
    monkeypatch.setattr(W, "cached_pair", lambda seed, neighbours="related": ("on", "off"))
    monkeypatch.setattr(W, "train_pair", lambda seed, neighbours="related", progress=None: (
        type("R", (), {"train_loss": 1.0})(), type("R", (), {"train_loss": 0.9})()))
    lines = []
    steps = W.warm_server(progress=lines.append)
    assert any(line.startswith("SmolLM2: not installed") for line in lines)
    names = [s.name for s in steps]
    assert names[:len(W.WARM_SEEDS) * len(W.NEIGHBOURS)] == [
        f"Training demo, seed {seed}, {n} neighbours" for seed in W.WARM_SEEDS for n in W.NEIGHBOURS]
    available = [s.name for s in list_sources() if s.available]
    assert names[len(W.WARM_SEEDS) * len(W.NEIGHBOURS):] == [f"Dataset {name}" for name in available]
    for step in steps[len(W.WARM_SEEDS) * len(W.NEIGHBOURS):]:
        assert step.detail.endswith(" documents") and int(step.detail.split()[0].replace(",", "")) > 0
