"""What every dry-run job does first: MindSpore's context, and the plan's strategies on the
network's primitives."""
from __future__ import annotations

from ...integration.annotate import replace_strategies


def setup_parallel(parallel_mode: str = "semi_auto_parallel", extra_context: dict | None = None):
    """Graph mode on the (fake) GPU, ``init()`` of the simulated communication, and the
    auto-parallel context ``parallel_mode`` over every simulated device (``RANK_SIZE``) plus
    ``extra_context``. Returns the ``mindspore`` module. The device count comes from the
    environment :func:`smsg_ms.dryrun.runner.run_child` sets (``RANK_SIZE``)."""
    import mindspore as ms
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.GRAPH_MODE, device_target="GPU")
    init()
    ctx = {"parallel_mode": parallel_mode, "device_num": get_group_size(),
           "global_rank": get_rank()}
    ctx.update(extra_context or {})
    ms.set_auto_parallel_context(**ctx)
    return ms


def shard_all(prims: dict, strategies: dict, out_strategies: dict | None = None) -> list[str]:
    """The plan's ``strategies`` (``{path: in_strategy}``) on the network's primitives, by
    :func:`smsg_ms.integration.annotate.replace_strategies` (``out_strategies``: ``{path:
    out_strategy}`` of the primitives whose output layout is set too; a primitive whose layout the
    network fixes, or one the plan does not set, keeps the network's own ``shard()``).

    Returns the paths whose own ``shard()`` was replaced.

    Raises:
        KeyError: a path the network does not have (the plan is for another network).
    """
    unknown = sorted(set(strategies) - set(prims))
    if unknown:
        raise KeyError(f"plan names primitives the network does not have: {', '.join(unknown)}")
    return replace_strategies(prims, strategies, out_strategies)


def executor_strategies(phase: str) -> dict:
    """``get_strategy`` of the compiled ``phase``: scoped node name → in_strategy MindSpore
    used (MindSpore's graph executor; no public API exposes it)."""
    from mindspore.graph.api import _cell_graph_executor

    return dict(_cell_graph_executor._graph_executor.get_strategy(phase))
