"""Check the first batches a model actually receives, for the attention implementation it runs.

    guard(model, tokenizer)          # before training: checks the next 3 forward calls, then removes itself

The guard is a forward pre-hook (``register_forward_pre_hook(..., with_kwargs=True)``): it sees
``model(**batch)``'s keyword arguments as the trainer passes them, reads the model's own
``config._attn_implementation`` and the ``use_cache`` the call will use (the call's own value,
else ``config.use_cache``, which transformers' model forward falls back to), and runs
:func:`packing_core.check.batch.check_hf_batch`. An error raises :class:`PackingCheckError` (or
warns, with ``on_error="warn"``) before the step runs. Across its batches it keeps a stream
summary (:attr:`Guard.summary`: fill, trained share, documents per row); when the last one is
checked and none held a document boundary, it warns that packing is off.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from packing_core._validate import InputError
from packing_core.check.batch import check_hf_batch
from packing_core.check.evidence import tokenizer_facts
from packing_core.check.result import BatchCheck
from packing_core.check.stream import StreamSummary, summarize_checks

ON_ERROR = ("raise", "warn")


class PackingCheckError(InputError):
    """A batch the model received lets documents read each other, or trains a wrong label."""


@dataclass
class Guard:
    """The installed hook: the checks it ran so far, and how to remove it."""

    batches: int
    on_error: str
    checks: list[BatchCheck] = field(default_factory=list)
    handle: object = None
    eos_known: bool = False

    @property
    def summary(self) -> StreamSummary:
        """The batches checked so far, as a stream: fill, trained share, whether packing is on."""
        return summarize_checks(self.checks, eos_known=self.eos_known)

    @property
    def active(self) -> bool:
        return self.handle is not None

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


def guard(model, tokenizer=None, batches: int = 3, on_error: str = "raise") -> Guard:
    """Install the check on ``model``'s next ``batches`` forward calls; returns the :class:`Guard`.

    ``tokenizer`` gives the EOS id that separates documents in wrapped streams (where nothing
    stronger marks them, and where the tokenizer fits the batch).
    """
    if on_error not in ON_ERROR:
        raise InputError(f"on_error={on_error!r}: choose one of {', '.join(ON_ERROR)}")
    if not isinstance(batches, int) or batches < 1:
        raise InputError(f"batches={batches!r}: give a whole number of batches to check, at least 1")
    if not hasattr(model, "register_forward_pre_hook"):
        raise InputError(f"guard needs a torch.nn.Module, got {type(model).__name__}")
    facts = None if tokenizer is None else tokenizer_facts(tokenizer)
    state = Guard(batches, on_error, eos_known=bool(facts and facts.eos_ids))
    config = getattr(model, "config", None)

    def hook(module, args, kwargs):
        batch = dict(kwargs)
        if args and "input_ids" not in batch:
            batch["input_ids"] = args[0]
        if batch.get("input_ids") is None:       # inputs_embeds only: nothing to read
            return None
        use_cache = batch.get("use_cache")
        if use_cache is None:
            use_cache = bool(getattr(config, "use_cache", False))
        impl = getattr(config, "_attn_implementation", None) or "sdpa"
        check = check_hf_batch(batch, impl, use_cache=bool(use_cache), tokenizer=facts)
        state.checks.append(check)
        if len(state.checks) >= state.batches:
            state.remove()
            if not state.summary.packing_on:
                warnings.warn(f"packing check, {len(state.checks)} batch(es): {state.summary.line}", stacklevel=2)
        if check.errors:
            message = f"packing check, batch {len(state.checks)}:\n{check.format_table()}"
            if state.on_error == "raise":
                state.remove()
                raise PackingCheckError(message)
            warnings.warn(message, stacklevel=2)
        return None

    state.handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    return state
