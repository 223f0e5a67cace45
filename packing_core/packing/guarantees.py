"""What the greedy packers promise in the worst case, against the fewest rows any plan of whole documents uses (OPT).

- **next-fit** keeps one row open: two neighbouring rows together always hold more than a row's worth of
  tokens, so it never uses more than 2·OPT rows (Johnson 1973).
- **ffd** (first-fit decreasing) uses at most 11/9·OPT + 6/9 rows, and the bound is tight (Dósa 2007, "The
  tight bound of first fit decreasing bin-packing algorithm is FFD(I) <= 11/9 OPT(I) + 6/9"; the complete proof
  by Dósa, Li, Han and Tuza, Theoretical Computer Science 2013).
- **bfd** (best-fit decreasing) has the same 11/9 ratio (Johnson 1973); its allowance here uses ffd's additive 6/9.

These are worst cases over every input, reached only by adversarial lengths. On real histograms, with many
small pieces to fill each gap, ffd and bfd end within a few rows of the lower bound, which is why the LP
(``optimal``) is worth running only where those few rows matter. The thirteen documents of *Watch it pack*:

>>> from fractions import Fraction
>>> GUARANTEES["ffd"].allows(5), GUARANTEES["next-fit"].allows(5)     # OPT = 5 rows there
(6, 10)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Guarantee:
    """``rows <= ratio x OPT + constant`` for every input."""

    strategy: str
    ratio: Fraction
    constant: Fraction
    says: str        # the bound in words
    source: str

    def allows(self, opt: int) -> int:
        """The most rows the guarantee permits when the optimum is ``opt`` rows."""
        return math.floor(self.ratio * opt + self.constant)

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "ratio": str(self.ratio), "constant": str(self.constant),
                "says": self.says, "source": self.source}


GUARANTEES = {g.strategy: g for g in (
    Guarantee("next-fit", Fraction(2), Fraction(0), "never more than 2·OPT rows", "Johnson 1973"),
    Guarantee("ffd", Fraction(11, 9), Fraction(6, 9), "at most 11/9·OPT + 6/9 rows", "Dósa 2007, tight"),
    Guarantee("bfd", Fraction(11, 9), Fraction(6, 9), "at most 11/9·OPT + 6/9 rows",
              "Johnson 1973 (the 11/9 ratio; the 6/9 is ffd's)"),
)}
