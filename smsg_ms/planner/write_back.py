"""Choosing how a plan's strategies reach MindSpore: the plan's ``write_back`` mode (what each
mode does to MindSpore's context: :mod:`smsg_ms.integration.writeback`).

* ``"shard"``: ``semi_auto_parallel``; every planned primitive gets ``shard(in_strategy)``, every
  other operator MindSpore's batch-parallel default.
* ``"propagate"``: ``auto_parallel`` with ``search_mode="sharding_propagation"``, the same
  ``shard()`` calls seeding the propagation, which lays out the operators no ``shard()`` reaches
  (functional calls).

``auto`` (the planner's default) picks ``shard``: the plan predicts every operator no ``shard()``
reaches (a functional call) at MindSpore's semi-auto default, and only ``shard`` compiles them
so. Sharding propagation re-lays exactly the functional calls the plan predicts to communicate
(the only ones it could improve), so a propagated plan's collectives diverge from its
prediction whenever propagation would help: Swin-T at 8 devices, AllGather 2-/4-/8-way 2/14/2
predicted, 0/8/0 inserted; window_bias 1 predicted, 0 inserted (``tests/test_writeback.py``);
mindformers Qwen3, more inserted than predicted. ``check`` then fails on a plan it cannot
predict. ``--write-back propagate`` remains for a user who prefers MindSpore's layout of those
calls (often fewer collectives, unchecked); ``plan`` names them either way
(:func:`unreached_with_collectives`). Pipelined plans always use ``shard`` (propagation with
pipeline stages is not checked).
"""
from __future__ import annotations

from ..plan import Plan, PlanError

WRITE_BACK_MODES = ("shard", "propagate")


#: values of the ``--write-back`` flag
WRITE_BACK_CHOICES = ("auto",) + WRITE_BACK_MODES


def is_functional(name: str) -> bool:
    """Is a decision name that of an operator without a primitive path (a functional call)?

    Such operators are labelled ``Type@scope`` (:attr:`smsg_ms.graph.model.OpNode.label`);
    primitive paths are dotted cell attributes and never contain ``@``.
    """
    return "@" in name


def unreached_with_collectives(plan: Plan) -> list[str]:
    """Sorted names of the functional operators (no ``shard()`` reaches them) for which the plan
    predicts collectives (group > 1) under MindSpore's semi-auto default.

    The gradient AllReduce of a weight a functional call reads whole (``grad_sync``: ConvNeXt's
    layer scale ``gamma * x``) does not count: it is the data-parallel gradient sync any layout
    with the batch cut pays, not a redistribution the propagation could avoid, and propagating
    instead lays such operators out where the plan does not predict (cut weights, other groups).
    """
    return sorted({d.name for d in plan.decisions
                   if not d.shardable and is_functional(d.name)
                   and any(int(c.get("group", 1)) > 1 and c.get("phase") != "grad_sync"
                           for c in d.collectives)})


def _pipelined(plan: Plan) -> bool:
    return bool(plan.pipeline) and int(plan.pipeline.get("stages", 1)) > 1


def choose_write_back(plan: Plan, mode: str = "auto") -> str:
    """The write-back mode for ``plan``: ``mode`` itself, or for ``"auto"`` the rule of the
    module docstring.

    Raises:
        PlanError: an unknown mode, or ``"propagate"`` for a pipelined plan.
    """
    if mode not in WRITE_BACK_CHOICES:
        raise PlanError(f"write-back mode must be one of {', '.join(WRITE_BACK_CHOICES)}, "
                        f"not {mode!r}")
    if mode == "propagate" and _pipelined(plan):
        raise PlanError("write-back 'propagate' is not supported for pipelined plans; use "
                        "'shard'")
    return "shard" if mode == "auto" else mode


def set_write_back(plan: Plan, mode: str = "auto") -> Plan:
    """Record :func:`choose_write_back` in ``plan.write_back``; a sealed plan is sealed again.

    Returns ``plan``. Raises :class:`PlanError` as :func:`choose_write_back`.
    """
    chosen = choose_write_back(plan, mode)
    if plan.write_back != chosen:
        sealed = bool(plan.content_hash)
        plan.write_back = chosen
        if sealed:
            plan.seal()
    return plan


__all__ = ["WRITE_BACK_CHOICES", "WRITE_BACK_MODES", "choose_write_back", "is_functional",
           "set_write_back", "unreached_with_collectives"]
