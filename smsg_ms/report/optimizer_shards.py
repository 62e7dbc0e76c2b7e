"""Per-operator memory of a pipelined plan under optimizer sharding, as the pipeline's stage
memory counts it (:func:`smsg_ms.cost.pipeline.parameter_memory`): the weight and the optimizer
state of each sharded parameter divided by its shard count ``r`` (its replicas on a stage's
devices), its gradient too from ``level2`` on. The plan's decisions hold the stage plan's memory,
before sharding; the pipeline record names the sharded parameters and their ``r``
(``optimizer_sharded``, :func:`smsg_ms.planner.stages.optimizer_sharded`). A sharded parameter is
replicated, so its reader's decision synchronises its gradient: the ``grad_sync`` collective
naming it carries the bytes of its slice (``S``), the part of the decision's parameter bytes
that is divided. Nothing is recomputed from the network.
"""
from __future__ import annotations

from ..plan import OpDecision, Plan

#: the memory kinds divided, by optimizer level (``parameter_memory``)
DIVIDED = {"level1": ("parameter_bytes", "optimizer_bytes"),
           "level2": ("parameter_bytes", "gradient_bytes", "optimizer_bytes"),
           "level3": ("parameter_bytes", "gradient_bytes", "optimizer_bytes")}


def sharding_level(plan: Plan) -> str | None:
    """The chosen optimizer-sharding level of a pipelined plan (``level1`` ... ``level3``), or
    ``None`` where nothing is sharded (no pipeline record, sharding off, no parameter
    sharded)."""
    rec = plan.pipeline or {}
    if not rec.get("optimizer_sharding") or not rec.get("optimizer_sharded"):
        return None
    level = (rec.get("chosen") or {}).get("optimizer_level") or "level1"
    return level if level in DIVIDED else "level1"


def sharded_memory(plan: Plan, decision: OpDecision) -> dict[str, float]:
    """The decision's memory kinds (``parameter_bytes`` ...) after optimizer sharding, bytes per
    device: for each parameter it synchronises that the record shards ``r``-way, the part of
    each kind :data:`DIVIDED` at the plan's level that the parameter's slice makes up (its
    ``grad_sync`` bytes over the decision's ``parameter_bytes``) divided by ``r``. The
    decision's own values where the plan shards nothing."""
    memory = {k: float(v) for k, v in decision.breakdown.items()
              if k.endswith("_bytes") and isinstance(v, (int, float))}
    level = sharding_level(plan)
    held = memory.get("parameter_bytes", 0.0)
    if level is None or held <= 0:
        return memory
    shards = plan.pipeline["optimizer_sharded"]
    for c in decision.collectives:
        r = shards.get(c.get("tensor")) if c.get("phase") == "grad_sync" else None
        if not r or r <= 1:
            continue
        part = min(float(c.get("bytes", 0)) / held, 1.0)
        for kind in DIVIDED[level]:
            if kind in memory:      # each kind in proportion to the elements (one dtype)
                memory[kind] -= float(decision.breakdown[kind]) * part * (1 - 1 / r)
    return memory


def shard_counts(plan: Plan, decision: OpDecision) -> list[int]:
    """The shard counts of the parameters the decision synchronises that the plan shards."""
    if sharding_level(plan) is None:
        return []
    shards = plan.pipeline["optimizer_sharded"]
    return sorted({int(shards[c["tensor"]]) for c in decision.collectives
                   if c.get("phase") == "grad_sync" and shards.get(c.get("tensor"), 1) > 1})


def sharded_total(plan: Plan, kind: str = "optimizer_bytes") -> float:
    """``kind`` summed over the plan's decisions after optimizer sharding
    (:func:`sharded_memory`): the whole network's, on one device of each stage."""
    return sum(sharded_memory(plan, d).get(kind, 0.0) for d in plan.decisions)
