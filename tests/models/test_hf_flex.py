"""transformers' own flex_attention on packed rows, against the real library (a random-init Llama, for speed).

What 5.24 does (masking_utils._preprocess_mask_arguments, create_causal_mask): with no
attention_mask and no cache it reads the documents from position_ids and builds a
document BlockMask; with a cache it skips that and runs one causal triangle over the row.
"""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from packing_core.attention.flex import flex_unavailable
from packing_core.models.hf_attention import HF_IMPLEMENTATIONS, hf_runner
from packing_core.verify.equivalence import default_documents
from packing_core.verify.run import verify_hf

pytestmark = pytest.mark.skipif(flex_unavailable("cpu") is not None, reason=str(flex_unavailable("cpu")))



@pytest.fixture
def no_compiler():
    """Inductor searching only for a compiler that is not there (its own patch: undone exactly)."""
    from torch._inductor import config
    with config.patch({"cpp.cxx": (None, "no-such-c++-compiler")}):
        yield

@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return LlamaForCausalLM(cfg).eval()


def test_flex_attention_is_one_of_the_verifiers_hf_paths():
    assert "flex_attention" in HF_IMPLEMENTATIONS


def test_hf_flex_isolates_documents_without_a_cache_and_leaks_with_one(llama):
    documents = default_documents((12, 8, 10), vocab_size=256, seed=1)
    # mask="off": the runner hands transformers no boundaries; position resets are all it has.
    isolated = verify_hf(llama, documents, mask="off", positions="reset", attn="flex_attention", use_cache=False)
    assert isolated.equivalent, isolated.format_table()
    leaking = verify_hf(llama, documents, mask="off", positions="reset", attn="flex_attention", use_cache=True)
    first, *later = leaking.documents
    assert first.equivalent and not any(d.equivalent for d in later), leaking.format_table()


def test_hf_flex_without_a_compiler_is_refused_in_one_line(llama, no_compiler):
    with pytest.raises(ValueError, match="attention 'flex_attention' compiles a C\\+\\+ kernel"):
        hf_runner(llama, "flex_attention")


def test_our_flex_backend_compiles_after_transformers_flex_attention_ran(llama):
    # Both compile FlexAttention in one process (a server offering both): each keeps its own cache.
    documents = default_documents((12, 8, 10), vocab_size=256, seed=2)
    theirs = verify_hf(llama, documents, mask="off", attn="flex_attention", use_cache=False)
    ours = verify_hf(llama, documents, mask="on", attn="packing_lab_flex")
    assert theirs.equivalent and ours.equivalent, ours.format_table()
