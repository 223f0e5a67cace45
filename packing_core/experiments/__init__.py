"""The training demo and the attention benchmark."""
