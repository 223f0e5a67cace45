"""Counting tokens without id lists: ByteLevelCounter must give the Rust tokenizer's numbers, or step aside."""
import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

import packing_core.models.tokenizers as toks
from packing_core.data.builtin import load_documents
from packing_core.data.lengths import count_tokens
from packing_core.models.tokenizers import ByteLevelCounter, load_tokenizer


@pytest.fixture(scope="module")
def smollm2():
    return load_tokenizer("smollm2")


@pytest.fixture(scope="module")
def counter(smollm2):
    made = ByteLevelCounter.build(smollm2.fast)
    assert made is not None, "SmolLM2's tokenizer is byte-level BPE: the counter must accept it"
    return made


def _rust(tok, texts):
    return [len(e) for e in tok.fast.encode_batch_fast(list(texts), add_special_tokens=False)]


def test_the_counter_gives_the_rust_tokenizers_lengths_on_every_fortune(smollm2, counter):
    texts = [d.text for d in load_documents("fortunes")]
    ascii_texts = [t for t in texts if t.isascii()]
    assert len(ascii_texts) > 0.99 * len(texts)
    assert [counter.count(t) for t in ascii_texts] == _rust(smollm2, ascii_texts)
    # the whole path (counter plus the Rust tokenizer for the rest) equals the id lists' lengths
    assert smollm2.count(texts).tolist() == [len(ids) for ids in smollm2(texts)]


# every ASCII character, and the pieces the pre-tokenizer's pattern treats specially
PIECES = [chr(i) for i in range(128)] + ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "  ", "\n\n", " \n",
                                         "\r\n", "Hello", " world", "2024", "  x", "\t\t", "'", "__init__"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=40).map("".join), min_size=1, max_size=20))
def test_the_counter_agrees_with_the_rust_tokenizer_on_any_ascii_text(smollm2, counter, texts):
    assert [counter.count(t) for t in texts] == _rust(smollm2, texts)


def test_many_random_ascii_texts_count_the_same(smollm2, counter):
    rng = random.Random(7)
    texts = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60))) for _ in range(20_000)]
    mine = [counter.count(t) for t in texts]
    rust = _rust(smollm2, texts)
    assert [t for t, a, b in zip(texts, mine, rust) if a != b] == []


def test_texts_the_counter_must_not_count_go_to_the_rust_tokenizer(smollm2, counter):
    special = "<|im_start|>user\nhi<|im_end|>"
    for text in (special, "héllo wörld", "naïve café", "emoji 🙂 here", "a<|endoftext|>b"):
        assert counter.count(text) is None
    texts = ["plain text", special, "héllo", "", "  "]
    assert smollm2.count(texts).tolist() == _rust(smollm2, texts)
    # the added token is one token in the text, which the word counter would have cut into pieces
    assert smollm2.count(["<|im_start|>"]).tolist() == [1]


def test_the_word_cache_stays_within_its_limit_and_keeps_counting_right(smollm2):
    small = ByteLevelCounter.build(smollm2.fast, limit=5)
    texts = [f"word{i} other{i * 7} third{i % 3}" for i in range(300)]
    assert [small.count(t) for t in texts] == _rust(smollm2, texts)
    assert len(small.words) <= 5


def test_count_tokens_uses_the_counter_and_matches_the_id_lists(smollm2):
    texts = [d.text for d in load_documents("fortunes")][:500]
    assert np.array_equal(count_tokens(smollm2, texts), [len(ids) for ids in smollm2(texts)])
    assert smollm2._counter and smollm2._counter[0] is not None


def test_other_kinds_of_tokenizer_get_no_counter():
    word_level = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    assert ByteLevelCounter.build(word_level) is None
    lowered = Tokenizer(models.BPE())
    lowered.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    lowered.normalizer = normalizers.Lowercase()
    assert ByteLevelCounter.build(lowered) is None
    prefixed = Tokenizer(models.BPE())
    prefixed.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    assert ByteLevelCounter.build(prefixed) is None


def test_a_counter_that_disagrees_on_the_probes_is_not_used(smollm2, monkeypatch):
    import re

    monkeypatch.setattr(toks, "_ASCII_WORDS", re.compile(r"."))   # one word per character: wrong counts
    assert ByteLevelCounter.build(smollm2.fast) is None


def test_a_folder_whose_tokenizer_truncates_still_counts_whole_texts(smollm2, tmp_path):
    folder = tmp_path / "truncating"
    folder.mkdir()
    fast = Tokenizer.from_str(smollm2.fast.to_str())
    fast.enable_truncation(4)
    fast.enable_padding(length=64)
    fast.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": None}))
    tok = load_tokenizer(str(folder))
    text = "a sentence of well over four tokens, so that a truncation at four would show"
    full = _rust(smollm2, [text])[0]
    assert full > 4
    assert tok.count([text]).tolist() == [full]
    assert [len(ids) for ids in tok([text])] == [full]


def test_the_setting_turns_the_counter_off_and_the_numbers_stay(smollm2, monkeypatch):
    texts = [d.text for d in load_documents("fortunes")][:300]
    on = smollm2.count(texts)
    counter = smollm2._counter[0]
    calls = []
    monkeypatch.setattr(type(counter), "count", lambda self, text: calls.append(text))
    monkeypatch.setenv("PACKING_LAB_WORD_COUNTER", "0")
    off = smollm2.count(texts)
    assert calls == [] and np.array_equal(on, off)
    monkeypatch.setenv("PACKING_LAB_WORD_COUNTER", "1")
    smollm2.count(texts[:3])
    assert calls == texts[:3]


def test_the_scan_benchmark_reports_both_scans_and_the_map_on_the_same_lengths():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "scan_speed.py"
    run = subprocess.run([sys.executable, str(script), "--docs", "3000", "--shards", "2", "--memory-docs", "2000",
                          "--chat", "300", "--json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["scan"]["tokens"] > 3000
    assert result["scan_rust_only"]["same_profile"] is True
    assert result["datasets_map"]["same_lengths"] is True
    assert result["speedup"] > 0 and result["speedup_rust_only"] > 0
    assert result["memory"][0]["documents"] == 2000
    assert result["bfd_1e9"]["documents"] >= 10**9
    cold = result["word_counter_cold"]
    assert cold["same"] is True and cold["counted_by_the_counter"] > 0.99 * cold["texts"]
    chat = result["chat"]   # the chat case: the same lengths and trained tokens as the peer, a verdict and the load
    assert chat["conversations"] == 300 and chat["same_lengths"] is True and chat["same_trained_tokens"] is True
    assert chat["verdict"] in ("PASS", "FAIL") and len(chat["load_average_before_after"]) == 6


def test_long_words_are_counted_right_and_never_kept(smollm2):
    from packing_core.models.tokenizers import MAX_CACHED_WORD

    counter = ByteLevelCounter.build(smollm2.fast)
    texts = [f"{i} " + "ab" * (5_000 + i) + " tail" for i in range(20)]   # 20 distinct words of 10,000+ characters
    assert [counter.count(t) for t in texts] == _rust(smollm2, texts)
    assert max(map(len, counter.words)) <= MAX_CACHED_WORD
    assert " tail" in counter.words                                        # the short words are kept


def test_a_count_adds_up_across_the_split_tokens_in_the_rust_tokenizer(smollm2):
    """tokenizers cuts a text at its added tokens first and encodes each piece alone: counts add up there."""
    assert {"<|im_start|>", "<|im_end|>"} <= set(smollm2.split_tokens) <= set(smollm2.added_tokens)
    texts = [d.text for d in load_documents("gsm8k")[:60]] + ["", " ", "\n\n", "end with space "]
    for token in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        joined = [a + token + b for a, b in zip(texts, texts[1:] + texts[:1])]
        whole = _rust(smollm2, joined)
        parts = _rust(smollm2, texts)
        assert whole == [a + 1 + b for a, b in zip(parts, parts[1:] + parts[:1])]


def test_no_split_tokens_when_an_added_token_strips_the_spaces_beside_it(smollm2):
    from tokenizers import AddedToken

    fast = Tokenizer.from_str(smollm2.fast.to_str())
    fast.add_special_tokens([AddedToken("<mask>", lstrip=True)])
    tok = toks.HFTokenizer("stripping", "sha256:x", smollm2.chat_template, None, fast=fast)
    assert "<mask>" in tok.added_tokens and tok.split_tokens == ()
    # and the reason is real: the space before "<mask>" is absorbed, so the counts do not add up
    assert len(fast.encode("a <mask>", add_special_tokens=False)) != \
        len(fast.encode("a ", add_special_tokens=False)) + 1
