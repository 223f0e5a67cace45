"""Masks as composable predicates, and attend() with five backends."""
