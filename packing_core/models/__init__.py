"""The tiny transformer, our attention backends in transformers, and the pretrained SmolLM2."""
