"""Check packing inside a training loop: :func:`guard` and, for HF Trainer / TRL, :class:`PackingCheckCallback`."""
from packing_core.integrations.guard import Guard, PackingCheckError, guard
from packing_core.integrations.trainer import PackingCheckCallback

__all__ = ["Guard", "PackingCheckCallback", "PackingCheckError", "guard"]
