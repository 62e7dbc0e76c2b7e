"""How much work the exact search may spend: a bound on work done, never on wall time.

Plans must be byte-identical on every rank, so the search cannot stop at a clock reading (ranks
run at different speeds). Instead a time limit in seconds is turned, once, into limits on what
the integer program (:mod:`.ilp`, HiGHS) may be given: the size of the program (non-zeros of its
constraint matrix, which sets the cost of HiGHS's root LP and cuts) and the number of
branch-and-bound nodes. Both depend only on the problem, so every rank stops at the same place and
keeps the same incumbent. Where a limit stops the search, the solution carries the best proven
lower bound (:attr:`smsg_ms.search.problem.Solution.bound`) and the gap is reported.

Rates measured on the project's reference machine (2 cores, HiGHS 1.x through scipy 1.17): the
root of a 318,408-non-zero program (LLaMA-2-70B widths, 8 layers, 64 devices, a 15 GiB limit)
took 20-35 s (9,000-16,000 non-zeros a second; the faster end is taken: at the slower one the
546,074-non-zero program of the 64-device ``mf-llama`` reference plan, which HiGHS solves to
optimality in seconds, was refused at the default bound and its plan came out 2.3x slower);
branch-and-bound nodes then cost well under 0.1 s each. ``scripts/bench_search.py --effort``
re-measures them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: non-zeros of an integer program HiGHS works through per second at its root (see above)
NONZEROS_PER_SECOND = 16_000.0
#: branch-and-bound nodes per second of budget left after the root
NODES_PER_SECOND = 10.0
#: the default bound of one ``plan`` (seconds of work on the reference machine)
DEFAULT_SECONDS = 60.0


@dataclass(frozen=True)
class Effort:
    """Work the exact search may spend on one solve.

    Attributes:
        seconds: the time limit it stands for (seconds on the reference machine); ``inf``: none.
    """

    seconds: float = DEFAULT_SECONDS

    def __post_init__(self):
        if not (isinstance(self.seconds, (int, float)) and self.seconds > 0):
            raise ValueError(f"time limit must be a positive number of seconds, got "
                             f"{self.seconds!r}")

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.seconds)

    def allows(self, nonzeros: int) -> bool:
        """May an integer program of ``nonzeros`` constraint non-zeros be started?"""
        return not self.bounded or nonzeros <= NONZEROS_PER_SECOND * self.seconds

    def node_limit(self, nonzeros: int) -> int | None:
        """Branch-and-bound nodes for a program of ``nonzeros`` (``None``: unlimited); at least
        one node beyond the root."""
        if not self.bounded:
            return None
        left = max(0.0, self.seconds - nonzeros / NONZEROS_PER_SECOND)
        return max(1, int(left * NODES_PER_SECOND))


UNBOUNDED = Effort(math.inf)
