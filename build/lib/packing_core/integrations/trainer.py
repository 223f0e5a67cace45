"""A ``transformers.TrainerCallback`` that installs :func:`~packing_core.integrations.hook.guard`.

    SFTTrainer(model, args, train_dataset=ds, callbacks=[PackingCheckCallback()])

At ``on_train_begin`` it guards the model the Trainer trains, with the Trainer's tokenizer
(``processing_class``) for the EOS id, so the first batches of the run are checked as the model
receives them.
"""
from __future__ import annotations

from transformers import TrainerCallback

from packing_core.integrations.hook import guard


class PackingCheckCallback(TrainerCallback):
    """Check the first ``batches`` training batches; ``on_error`` is ``"raise"`` or ``"warn"``."""

    def __init__(self, batches: int = 3, on_error: str = "raise", tokenizer=None):
        self.batches, self.on_error, self.tokenizer = batches, on_error, tokenizer
        self.guard = None

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if model is not None:
            self.guard = guard(model, self.tokenizer or processing_class, batches=self.batches,
                               on_error=self.on_error)
        return control

    @property
    def summary(self):
        """The guard's stream summary of the batches it checked (None before training starts)."""
        return None if self.guard is None else self.guard.summary

    def on_train_end(self, args, state, control, **kwargs):
        if self.guard is not None:
            self.guard.remove()
        return control
