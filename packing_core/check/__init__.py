"""Static checks of a batch, for the attention implementation that will read it."""
