"""Chats counted per shape and per piece: the same numbers as transformers, chat by chat, with SmolLM2."""
from __future__ import annotations

import functools
import json

import numpy as np
import pyarrow as pa
import pytest

from packing_core._validate import MAX_TEXT_BYTES, InputError
from packing_core.data import load_documents
from packing_core.data.chats import _one_by_one, chat_lengths, cut_frames
from packing_core.data.intake import profile_from_inputs
from packing_core.models.tokenizers import load_tokenizer

SMOLLM2 = functools.partial(load_tokenizer, "smollm2")


@pytest.fixture(scope="module")
def smollm2():
    return load_tokenizer("smollm2")


def _chats(n: int, seed: int = 0) -> list[list[dict]]:
    """Real chats of several shapes: GSM8K questions and worked answers (some with a curly apostrophe, so
    not all ASCII), a system turn or none, one to three rounds, and now and then an answer left empty."""
    docs = load_documents("gsm8k")
    rng = np.random.default_rng(seed)
    out = []
    for _chat in range(n):
        messages = [{"role": "system", "content": "You are a careful tutor.\n"}] if rng.random() < 0.5 else []
        for _round in range(int(rng.integers(1, 4))):
            d = docs[int(rng.integers(len(docs)))]
            answer = "" if rng.random() < 0.02 else d.answer
            messages += [{"role": "user", "content": d.prompt}, {"role": "assistant", "content": answer}]
        out.append(messages)
    return out


def _tagged(template: str) -> str:
    """SmolLM2's template with {% generation %} around each answer and its end of turn (what TRL's
    assistant_only_loss reads through return_assistant_tokens_mask)."""
    answer = "message['content'] + '<|im_end|>' + '\n'"
    head = "{{'<|im_start|>' + message['role'] + '\n' + "
    assert head + answer + "}}" in template
    return template.replace(head + answer + "}}", "{{'<|im_start|>' + message['role'] + '\n'}}{% if message['role'] == "
                            "'assistant' %}{% generation %}{{" + answer + "}}{% endgeneration %}{% else %}{{" + answer
                            + "}}{% endif %}")


class Counting:
    """A tokenizer that counts the calls made to it (renderings, counting calls, texts counted)."""

    def __init__(self, tok):
        self.tok, self.renders, self.count_calls, self.texts = tok, 0, 0, 0
        self.chat_template, self.split_tokens, self.added_tokens = tok.chat_template, tok.split_tokens, tok.added_tokens

    def apply_chat_template(self, *a, **k):
        self.renders += 1
        return self.tok.apply_chat_template(*a, **k)

    def count(self, texts):
        self.count_calls, self.texts = self.count_calls + 1, self.texts + len(texts)
        return self.tok.count(texts)

    def __call__(self, texts):
        return self.tok(texts)


def test_per_shape_counts_equal_chat_by_chat_rendering_on_real_chats(smollm2):
    chats = _chats(400)
    lengths, trained = chat_lengths(chats, smollm2, str)
    alone = _one_by_one(chats, smollm2, str)
    assert np.array_equal(lengths, alone[0]) and np.array_equal(trained, alone[1])
    assert 0 < trained.sum() < lengths.sum()


def test_lengths_and_trained_tokens_are_transformers_own(smollm2):
    """Length: apply_chat_template(tokenize=True); trained: the assistant mask of the tagged template."""
    chats = _chats(120, seed=1)
    lengths, trained = chat_lengths(chats, smollm2, str)
    hf = smollm2.hf
    own = hf.apply_chat_template(chats, tokenize=True)["input_ids"]
    masked = hf.apply_chat_template(chats, tokenize=True, chat_template=_tagged(smollm2.chat_template),
                                    return_assistant_tokens_mask=True)
    assert lengths.tolist() == [len(ids) for ids in own] == [len(ids) for ids in masked["input_ids"]]
    assert trained.tolist() == [sum(m) for m in masked["assistant_masks"]]


def test_chats_are_rendered_per_shape_and_counted_in_a_few_calls(smollm2):
    chats = _chats(600, seed=2)
    counting = Counting(smollm2)
    chat_lengths(chats, counting, str)
    shapes = {tuple(m["role"] for m in c) for c in chats}
    assert counting.renders <= len(shapes) * 7          # the whole chat and two per answer, per shape
    assert counting.count_calls <= 10 * len(shapes)     # never once per chat, or per turn
    assert counting.texts < sum(len(c) for c in chats) + 50   # each message counted about once


def test_a_sharegpt_file_is_read_as_chat(smollm2, tmp_path):
    chats = _chats(40, seed=3)
    names = {"user": "human", "assistant": "gpt", "system": "system"}
    (tmp_path / "messages.jsonl").write_text("".join(json.dumps({"messages": c}) + "\n" for c in chats))
    (tmp_path / "sharegpt.jsonl").write_text("".join(json.dumps(
        {"id": i, "conversations": [{"from": names[m["role"]], "value": m["content"]} for m in c]}) + "\n"
        for i, c in enumerate(chats)))
    messages, sharegpt = (profile_from_inputs([tmp_path / f], SMOLLM2) for f in ("messages.jsonl", "sharegpt.jsonl"))
    assert sharegpt.kind == "messages"
    assert sharegpt.count_dict() == messages.count_dict() and sharegpt.trained_tokens == messages.trained_tokens


def test_a_sharegpt_role_that_is_not_known_is_named_with_the_mapping(smollm2):
    chat = [{"from": "human", "value": "hi"}, {"from": "bing", "value": "hello"}]
    with pytest.raises(InputError, match="line 1: message 1 has an unknown role 'bing'.*ShareGPT's human, gpt, system"):
        chat_lengths([chat], smollm2, lambda i: f"line {i + 1}")


def test_a_template_that_does_more_than_print_is_rendered_chat_by_chat_and_stays_exact(smollm2, tmp_path):
    folder = tmp_path / "trim-tokenizer"
    smollm2.hf.save_pretrained(folder)
    template = smollm2.chat_template.replace("message['content']", "message['content'] | trim")
    (folder / "chat_template.jinja").write_text(template)
    tok = load_tokenizer(str(folder))
    chats = _chats(30, seed=4)
    chats[0][-1]["content"] = "  padded answer  \n"
    lengths, trained = chat_lengths(chats, tok, str)
    own = smollm2.hf.apply_chat_template(chats, tokenize=True, chat_template=template)["input_ids"]
    assert lengths.tolist() == [len(ids) for ids in own]
    assert np.array_equal(trained, _one_by_one(chats, tok, str)[1])


def test_the_first_bad_chat_is_named_whether_its_messages_or_the_template_refuse_it(smollm2, tmp_path):
    folder = tmp_path / "system-first"
    smollm2.hf.save_pretrained(folder)
    template = ("{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system turn must come first') }}"
                "{% endif %}" + smollm2.chat_template)
    (folder / "chat_template.jinja").write_text(template)
    tok = load_tokenizer(str(folder))
    good = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    no_system, bad_role = good[1:], [{"role": "wizard", "content": "x"}]
    where = lambda i: f"line {i + 1}"  # noqa: E731
    with pytest.raises(InputError, match="line 3: the chat template failed .*a system turn must come first"):
        chat_lengths([good, good, no_system, good, bad_role], tok, where)
    with pytest.raises(InputError, match="line 2: message 0 has an unknown role 'wizard'"):
        chat_lengths([good, bad_role, no_system], tok, where)


def test_a_chat_whose_rendering_is_too_long_is_refused_as_chat_by_chat(smollm2):
    half = "word " * (MAX_TEXT_BYTES // 10 + 1000)
    long_chat = [{"role": "user", "content": half}, {"role": "assistant", "content": half}]
    with pytest.raises(InputError, match="line 2: the chat template rendered .* characters, more than one document"):
        chat_lengths([_chats(1)[0], long_chat], smollm2, lambda i: f"line {i + 1}")


def test_an_arrow_column_and_python_lists_give_the_same_counts(smollm2):
    chats = _chats(50, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(chat_lengths(pa.array(chats), smollm2, str),
                                                    chat_lengths(chats, smollm2, str)))


def test_a_frame_is_cut_only_where_the_split_token_surely_matches():
    frames = ("u:", "<e>a:", "<e>")
    assert cut_frames(frames, ("<e>",), ("<e>",)) == (2, (("u:", 0), ("a:", 1), ("",)))
    # another added token could start in the content before "<e>" ("...q" + "<e" ...): no cut there
    cuts, pieces = cut_frames(frames, ("<e>",), ("<e>", "q<e"))
    assert cuts == 0 and pieces == (("u:", 0, "<e>a:", 1, "<e>"),)
    # a longer added token that starts with the split token and may run into the content: no cut either
    assert cut_frames(("<e", ">"), ("<e",), ("<e", "<e>x"))[0] == 0
