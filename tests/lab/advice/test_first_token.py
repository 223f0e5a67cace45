"""What a packed document's first position trains on, read from the lab's own packed batch and SmolLM2's tokenizer."""
import pytest

import packing_core as pc
from app_pages import _content
from packing_core.batch.packed import PackedBatch
from packing_lab.advice.first_token import CONVENTIONS, ByteTokens, HFTokens, document_starts

TEXTS = list(_content.EXAMPLE_TEXTS)


@pytest.fixture(scope="module")
def smollm2(require_smollm2):
    return pc.load_tokenizer("auto")


def _targets_of_document_1(docs):
    """The targets the lab's batch builder gives document 1's positions (resets, mask, last target masked)."""
    batch = PackedBatch.from_documents(docs, sum(map(len, docs)), "next-fit")
    start, end = int(batch.cu_seqlens[1]), int(batch.cu_seqlens[2])
    return batch.input_ids.flatten()[start:end].tolist(), batch.targets.flatten()[start:end].tolist()


def test_eos_between_documents_never_trains_a_documents_first_word(smollm2):
    tok = HFTokens(smollm2)
    docs = [tok.encode(t) + tok.encode(tok.eos) for t in TEXTS]
    ids, targets = _targets_of_document_1(docs)
    s = document_starts(smollm2, TEXTS)[0]
    assert s.convention == CONVENTIONS[0] and not s.opening_trained
    assert ids[0] not in targets and tok.token(ids[0]) == s.first_holds == s.opening   # the first word: never a target
    assert tok.token(targets[0]) == s.first_predicts


def test_a_bos_at_each_start_makes_the_first_word_position_zeros_target(smollm2):
    tok = HFTokens(smollm2)
    assert smollm2.hf.bos_token == "<|im_start|>"
    assert smollm2.hf(["x"])["input_ids"][0][0] != smollm2.hf.bos_token_id     # the tokenizer adds no BOS itself
    docs = [tok.encode(tok.bos) + tok.encode(t) + tok.encode(tok.eos) for t in TEXTS]
    ids, targets = _targets_of_document_1(docs)
    s = document_starts(smollm2, TEXTS)[1]
    assert tok.token(ids[0]) == s.first_holds == "<|im_start|>" and tok.token(targets[0]) == s.opening
    assert s.opening_trained and s.added_per_document == 1
    assert s.distinct_first_targets == len({tok.encode(t)[0] for t in TEXTS})      # one input, that many targets


def test_the_chat_template_puts_the_same_header_before_every_document(smollm2):
    s = document_starts(smollm2, TEXTS)[2]
    rendered = smollm2.apply_chat_template([{"role": "user", "content": TEXTS[1]}])
    header = rendered.split(TEXTS[1])[0]
    assert s.added_per_document == len(HFTokens(smollm2).encode(header))       # SmolLM2's system prompt and turn
    assert (s.first_holds, s.first_predicts, s.distinct_first_targets) == ("<|im_start|>", "system", 1)


def test_the_rules_read_the_same_on_bytes_without_a_vocabulary():
    starts = document_starts(ByteTokens({"<s>": 1, "</s>": 2}), ["hello", "world"])
    assert [s.opening_trained for s in starts] == [False, True, True]
    with pytest.raises(ValueError, match="two texts"):
        document_starts(ByteTokens({"<s>": 1, "</s>": 2}), ["alone"])


def test_masks_and_labels_teaches_it_on_smollm2s_tokens(smollm2):
    from tests._support import open_page

    at = open_page("masks_and_labels")
    said = "\n".join(m.value for m in at.markdown).replace("\\", "")
    for s in document_starts(smollm2, TEXTS):
        assert s.sentence in said
    assert "tokenised by SmolLM2's tokenizer" in said
