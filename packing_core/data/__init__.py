"""Files, built-in sources and lengths; no torch, no transformers (a tokenizer is passed in)."""
