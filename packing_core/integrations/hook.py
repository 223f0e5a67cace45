"""Check the first batches a model actually receives, for the attention implementation it runs.

    guard(model, tokenizer)          # before training: checks the next 3 forward calls, then removes itself

The guard is a forward pre-hook (``register_forward_pre_hook(..., with_kwargs=True)``): it sees
``model(**batch)``'s keyword arguments as the trainer passes them, reads the model's own
``config._attn_implementation``, its ``config.model_type`` (every layer of that family that mixes
tokens is judged, not only attention: :mod:`packing_core.check.mixers`, with the fast kernels this
process would call) and the ``use_cache`` the call will use (the call's own value, else
``config.use_cache``, which transformers' model forward falls back to), and runs
:func:`packing_core.check.batch.check_hf_batch`. A model type the lab has not measured is judged
for attention only, and the guard says so once. An error raises :class:`PackingCheckError` (or
warns, with ``on_error="warn"``) before the step runs. Across its batches it keeps a stream
summary (:attr:`Guard.summary`: fill, trained share, documents per row); when the last one is
checked and none held a document boundary, it warns that packing is off. The verdicts are for the
transformers release the guard runs under (:func:`packing_core.attention.releases.release_rules`):
outside the lab's measured releases it says so once and raises only for the findings that hold
whatever the release (labels, offsets, what it can judge), never a guessed leak.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from packing_core._validate import InputError
from packing_core.attention.releases import not_measured_line, release_rules
from packing_core.check.batch import check_hf_batch
from packing_core.check.evidence import tokenizer_facts
from packing_core.check.mixers import SCOPE_NOTE, installed_kernels, model_family
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
    unchecked: list[str] = field(default_factory=list)   # why a batch could not be read (on_error="warn")
    handle: object = None
    eos_known: bool = False
    model_type: str = ""           # the family judged beyond attention; "" = attention only
    scope: str = ""                # why only attention was judged, when it was
    release: str = ""              # the transformers release the guard judges for: the one it runs under

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


def model_type_of(model) -> tuple[str, str]:
    """``(model type judged, scope note)``: the measured family of ``model.config.model_type``, or "" and why not."""
    name = getattr(getattr(model, "config", None), "model_type", None)
    if not name:
        return "", SCOPE_NOTE.replace("give --model or --model-type", "the model has no config.model_type")
    try:
        return model_family(name, release_rules()).model_type, ""
    except InputError as e:
        return "", f"note: the verdict covers attention layers only: {e}"


def guard(model, tokenizer=None, batches: int = 3, on_error: str = "raise") -> Guard:
    """Install the check on ``model``'s next ``batches`` forward calls; returns the :class:`Guard`.

    ``tokenizer`` gives the EOS id that separates documents in wrapped streams (where nothing
    stronger marks them, and where the tokenizer fits the batch). The model's own type decides
    which layers are judged (:func:`model_type_of`).
    """
    if on_error not in ON_ERROR:
        raise InputError(f"on_error={on_error!r}: choose one of {', '.join(ON_ERROR)}")
    if isinstance(batches, bool) or not isinstance(batches, int) or batches < 1:   # True is an int: not a count
        raise InputError(f"batches={batches!r}: give a whole number of batches to check, at least 1")
    if not hasattr(model, "register_forward_pre_hook"):
        raise InputError(f"guard needs a torch.nn.Module, got {type(model).__name__}")
    facts = None if tokenizer is None else tokenizer_facts(tokenizer)
    model_type, scope = model_type_of(model)
    rules = release_rules()
    state = Guard(batches, on_error, eos_known=bool(facts and facts.eos_ids), model_type=model_type, scope=scope,
                  release=rules.release)
    config = getattr(model, "config", None)
    kernels = installed_kernels()
    if scope:
        warnings.warn(f"packing check: {scope}", stacklevel=2)
    if not rules.covered:
        warnings.warn(f"packing check: {not_measured_line(rules)}", stacklevel=2)

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
        try:
            check = check_hf_batch(batch, impl, use_cache=bool(use_cache), tokenizer=facts,
                                   model_type=model_type or None, kernels=kernels, transformers=rules.release)
        except InputError as e:     # a batch with nothing to read (a meta tensor ...): said, or raised
            if state.on_error == "raise":
                state.remove()
                raise
            state.unchecked.append(str(e))
            if len(state.checks) + len(state.unchecked) >= state.batches:
                state.remove()
            warnings.warn(f"packing check, batch {len(state.checks) + len(state.unchecked)}: not checked: {e}",
                          stacklevel=2)
            return None
        state.checks.append(check)
        if len(state.checks) + len(state.unchecked) >= state.batches:
            state.remove()
            if not state.summary.packing_on:
                warnings.warn(f"packing check, {len(state.checks)} batch(es): {state.summary.line}", stacklevel=2)
        if check.errors:
            message = f"packing check, batch {len(state.checks) + len(state.unchecked)}:\n{check.format_table()}"
            if state.on_error == "raise":
                state.remove()
                raise PackingCheckError(message)
            warnings.warn(message, stacklevel=2)
        return None

    state.handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    return state
