"""The zoo's two types: a :class:`Bug` and the :class:`ZooResult` of reproducing one."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from packing_core.check.rules import RULES


@dataclass(frozen=True)
class Bug:
    """One packing bug: what goes wrong, where it was reported, the fix, and how the lab shows it.

    ``needs`` says what ``run`` loads: ``"nothing"`` for a planted fault (``run(batch)`` returns
    the lab's PackedBatch with the bug planted), else the model (``run()`` returns a
    :class:`ZooResult`). ``caught_by`` names findings of ``check.rules``; ``example``, when set,
    returns ``(broken, fixed, check keyword arguments)`` trainer batches that need no model.
    """

    name: str
    title: str
    what: str                           # what goes wrong
    reported: tuple[str, ...]           # "owner/repo #N: what it says", from the trackers
    fix: str
    needs: str                          # "nothing" | what the reproduction runs on
    caught_by: tuple[str, ...]          # finding names (check.rules.RULES); () = no static finding sees it
    run: Callable = None
    example: Callable | None = None

    def __post_init__(self):
        unknown = [n for n in self.caught_by if n not in RULES]
        if unknown:
            raise ValueError(f"bug {self.name}: caught_by names unknown findings {unknown}")

    @property
    def planted(self) -> bool:
        return self.needs == "nothing"

    @property
    def caught_by_titles(self) -> tuple[str, ...]:
        """The plain-language titles of the findings that catch it, for pages."""
        return tuple(RULES[n].title for n in self.caught_by)

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "what": self.what, "reported": list(self.reported),
                "fix": self.fix, "needs": self.needs, "caught_by": list(self.caught_by)}


@dataclass(frozen=True)
class ZooResult:
    """One reproduction: the broken setup and the fixed one, measured and checked."""

    name: str
    symptom: str                          # the measured symptom of the broken setup, in words
    fixed: str                            # the same measurement on the fixed setup
    broken_max_abs_diff: float | None     # max |dlogit| vs each document alone (None: not a logit bug)
    fixed_max_abs_diff: float | None
    changed_predictions: int | None       # top-1 next tokens changed by the bug
    caught: bool                          # the lab's check flags the broken setup
    silent_on_fix: bool                   # ... and says nothing of the fixed one
    check_says: str                       # what the check reported on the broken setup

    def to_dict(self) -> dict:
        return asdict(self)
