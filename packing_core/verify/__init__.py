"""Alone vs packed: one VerifyReport for every model."""
