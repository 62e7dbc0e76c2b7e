"""Planning settings as one typed, frozen object (in the spirit of Alpa's
``AutoShardingOption``): what the planner's functions pass on instead of long parameter lists.
The public keyword APIs (:func:`~smsg_ms.planner.plan_graph`,
:func:`~smsg_ms.planner.plan_network`, :func:`~smsg_ms.planner.plan_network_pipelined`) build
one from their arguments."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..search.effort import DEFAULT_SECONDS, Effort

#: Up to this many devices the planner proposes every strategy, replicated ones included; above
#: it only strategies that use every device (MindSpore's ``fully_use_devices``), which keeps the
#: option count, and the redistribution matrices, tractable.
EXHAUSTIVE_UP_TO = 16


#: Virtual-stage counts the pipelined search tries by default (interleaved 1F1B, v > 1).
VIRTUAL_STAGES = (1, 2)


@dataclass(frozen=True)
class PlanningOptions:
    """How to plan (not what: the graph, network and device count are the call's inputs).

    Attributes:
        hardware: preset name or :class:`smsg_ms.cost.hardware.Hardware`.
        memory_gib: per-device memory limit in GiB (``None``: the preset's memory; ``inf``: no
            limit).
        progress: show the search's progress bar (``None``: when the search is slow).
        exhaustive: propose replicated strategies too (``None``: up to
            :data:`EXHAUSTIVE_UP_TO` devices).
        write_back: ``auto``, ``shard`` or ``propagate`` (:mod:`smsg_ms.planner.write_back`).
        reuse: build the problem once per structural signature (exact and faster; ``False`` is
            the plain reference computation, same plan).
        stages: pipeline stages: ``"auto"`` or a count (pipelined planning only).
        micro_batches: fixed micro-batch count, ``None``: searched (pipelined only).
        optimizer_sharding: force MindSpore's ``enable_parallel_optimizer`` on (``True``: level
            1) or off, or one ``optimizer_level`` (``"level1"``, ``"level2"``, ``"level3"``);
            ``None``: searched over all of them (pipelined only).
        virtual_stages: virtual stages of an interleaved pipeline (1, the default: plain 1F1B),
            ``None``: searched over :data:`VIRTUAL_STAGES` (pipelined only).
        recompute: allow ``Cell.recompute()`` of blocks (searched) or never (pipelined only).
        workers: processes solving stage plans, ``None``: the default
            (:func:`smsg_ms.planner.workers.default_workers` from 64 devices on; pipelined only).
        time_limit: seconds of search work (:mod:`smsg_ms.search.effort`: a bound on work, so
            every rank stops at the same plan); past it the plan is the best found and its
            totals give the proven lower bound and the optimality gap.
        replace_strategies: plan anew the primitives whose strategy the network's own
            ``shard()`` sets; by default each is kept as its one option where it fits the
            devices (:func:`smsg_ms.cost.kept_layout.kept_options`; single stage only).

    Raises:
        ValueError: a time limit that is not a positive number of seconds.
    """

    hardware: Any = "ascend910b"
    memory_gib: float | None = None
    progress: bool | None = None
    exhaustive: bool | None = None
    write_back: str = "auto"
    reuse: bool = True
    stages: str | int = "auto"
    micro_batches: int | None = None
    optimizer_sharding: bool | str | None = None
    recompute: bool = True
    virtual_stages: int | None = 1
    workers: int | None = None
    time_limit: float = DEFAULT_SECONDS
    replace_strategies: bool = False

    def __post_init__(self):
        Effort(self.time_limit)          # refuses a bad limit before any work

    @property
    def effort(self) -> Effort:
        """The search's work limit (:class:`smsg_ms.search.effort.Effort`)."""
        return Effort(self.time_limit)

    def exhaustive_on(self, devices: int) -> bool:
        """Whether a plan on ``devices`` devices proposes every strategy (:attr:`exhaustive`)."""
        return devices <= EXHAUSTIVE_UP_TO if self.exhaustive is None else bool(self.exhaustive)

    def memory_limit(self, hardware) -> float:
        """Bytes per device: :attr:`memory_gib` (GiB → bytes) or ``hardware.memory``."""
        return self.memory_gib * 2**30 if self.memory_gib is not None else hardware.memory


__all__ = ["EXHAUSTIVE_UP_TO", "PlanningOptions", "VIRTUAL_STAGES"]
