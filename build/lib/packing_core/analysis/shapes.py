"""Model shapes for the cost views: three presets read from public configs, and their parameter counts.

The per-token training FLOP estimate (``analysis.costs``) needs ``N`` (the parameters a token
multiplies), ``n_layer`` and ``d_model``. Each preset keeps the fields of its Hugging Face
``config.json`` that fix those numbers, and ``N`` is counted from them, as a Llama-style decoder
(``transformers.LlamaForCausalLM``) holds its weights::

    embeddings      vocab x d_model                  (once more for an untied output head)
    per layer       q, o: d_model²  each;  k, v: d_model x d_kv each  (d_kv = d_model x kv_heads / heads)
                    gate, up, down: d_model x d_ff each;  two RMSNorm weights of d_model
    final norm      d_model

>>> MODEL_SHAPES["SmolLM2-135M"].params                  # HuggingFaceTB/SmolLM2-135M: 134,515,008
134515008
>>> round(MODEL_SHAPES["7B"].params / 1e9, 2), round(MODEL_SHAPES["70B"].params / 1e9, 2)
(6.74, 68.98)

A test builds each preset's ``LlamaForCausalLM`` on the meta device and counts its parameters,
and checks SmolLM2's fields against the model the lab ships.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from packing_core._validate import InputError

__all__ = ["MODEL_SHAPES", "ModelShape", "llama_shape", "model_shape"]


@dataclass(frozen=True)
class ModelShape:
    """The numbers the per-token FLOP formula needs (``n_layer``, ``d_model``, ``params`` = N), and the config
    fields they come from (zero where a shape is given by hand). ``source`` names the config it was read from."""

    name: str
    n_layer: int
    d_model: int
    params: float   # N, every parameter a token multiplies (embeddings included)
    n_heads: int = 0
    n_kv_heads: int = 0
    d_ff: int = 0
    vocab: int = 0
    tied_embeddings: bool = False
    source: str = ""

    @property
    def label(self) -> str:
        """One line for a picker: ``SmolLM2-135M: 30 layers, d_model 576, 9 heads, 135M parameters``."""
        n = self.params
        size = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"
        heads = f", {self.n_heads} heads" if self.n_heads else ""
        return f"{self.name}: {self.n_layer} layers, d_model {self.d_model:,}{heads}, {size} parameters"

    def to_dict(self) -> dict:
        return asdict(self)


def llama_shape(name: str, *, n_layer: int, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, vocab: int,
                tied_embeddings: bool, source: str) -> ModelShape:
    """A Llama-style decoder's shape from its config fields, with N counted as the module docstring says."""
    d_kv = d_model * n_kv_heads // n_heads
    per_layer = 2 * d_model * d_model + 2 * d_model * d_kv + 3 * d_model * d_ff + 2 * d_model
    embeddings = vocab * d_model * (1 if tied_embeddings else 2)
    params = embeddings + n_layer * per_layer + d_model
    return ModelShape(name, n_layer, d_model, params, n_heads, n_kv_heads, d_ff, vocab, tied_embeddings, source)


MODEL_SHAPES = {
    "SmolLM2-135M": llama_shape(
        "SmolLM2-135M", n_layer=30, d_model=576, n_heads=9, n_kv_heads=3, d_ff=1536, vocab=49152,
        tied_embeddings=True, source="HuggingFaceTB/SmolLM2-135M config.json (the model the lab ships)"),
    "7B": llama_shape(
        "7B (Llama-2 shape)", n_layer=32, d_model=4096, n_heads=32, n_kv_heads=32, d_ff=11008, vocab=32000,
        tied_embeddings=False, source="meta-llama/Llama-2-7b-hf config.json (transformers' LlamaConfig defaults)"),
    "70B": llama_shape(
        "70B (Llama-2 shape)", n_layer=80, d_model=8192, n_heads=64, n_kv_heads=8, d_ff=28672, vocab=32000,
        tied_embeddings=False, source="meta-llama/Llama-2-70b-hf config.json"),
}


def model_shape(shape: ModelShape | str) -> ModelShape:
    """A preset by its key (``"7B"``), or a ``ModelShape`` as it is; an unknown key names the presets."""
    if isinstance(shape, ModelShape):
        return shape
    if shape not in MODEL_SHAPES:
        raise InputError(f"unknown model shape {shape!r}; choose one of {', '.join(MODEL_SHAPES)}")
    return MODEL_SHAPES[shape]
