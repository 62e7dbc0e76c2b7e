"""How a plan's strategies reach MindSpore: the plan's ``write_back`` mode.

* ``"shard"``: ``semi_auto_parallel``; every planned primitive gets ``shard(in_strategy)``, every
  other operator MindSpore's batch-parallel default (``GenerateBatchStrategiesWithCheck``,
  ``ops_info/operator_info.cc``).
* ``"propagate"``: ``auto_parallel`` with ``search_mode="sharding_propagation"``; the same
  ``shard()`` calls are the propagation's seeds. MindSpore keeps a configured strategy and
  gives the operators no ``shard()`` reaches (functional calls such as ``ops.expand_dims``, which
  use one module-level primitive) the layouts propagated from their neighbours instead of the
  batch-parallel default. Checked in the dry-run (``get_strategy`` after the compile) on mlp,
  llama, bert, vit-b16 and mindcv Swin-T at 8 devices: every seed kept, no collective added
  (docs/swin-t.md).

The mode is chosen when planning (:mod:`smsg_ms.planner.write_back`); this module turns it,
and the plan's data-input layout, into MindSpore's parallel context
(:func:`apply_plan_context`).
"""
from __future__ import annotations

from ..plan import Plan, PlanError
from ..planner.write_back import WRITE_BACK_MODES, unreached_with_collectives


def _mode(plan: Plan) -> str:
    mode = getattr(plan, "write_back", "shard")
    if mode not in WRITE_BACK_MODES:
        raise PlanError(f"plan for '{plan.network}' has unknown write_back {mode!r} "
                        f"(known: {', '.join(WRITE_BACK_MODES)})")
    return mode


def parallel_context(plan: Plan) -> dict:
    """The keys of ``mindspore.set_auto_parallel_context`` the plan's write-back needs:
    ``{"parallel_mode": "semi_auto_parallel"}`` or ``{"parallel_mode": "auto_parallel",
    "search_mode": "sharding_propagation"}``, with ``"enable_alltoall": True`` for a plan priced
    with it (:attr:`Plan.enable_alltoall`).

    Raises:
        PlanError: an unknown ``write_back`` value in the plan.
    """
    extra = {"enable_alltoall": True} if getattr(plan, "enable_alltoall", False) else {}
    if _mode(plan) == "propagate":
        return {"parallel_mode": "auto_parallel", "search_mode": "sharding_propagation", **extra}
    return {"parallel_mode": "semi_auto_parallel", **extra}


def wrapper_mode(plan: Plan) -> str:
    """``parallel_mode`` of ``mindspore.parallel.auto_parallel.AutoParallel`` for the plan:
    ``"semi_auto"`` or ``"sharding_propagation"``."""
    return "sharding_propagation" if _mode(plan) == "propagate" else "semi_auto"


def dataset_layout(plan: Plan, input_shapes: list | None = None):
    """The plan's data-input layout for MindSpore: ``None`` (``full_batch``) or a tuple of cut
    tuples for ``dataset_strategy``, given the shapes the compile receives.

    MindSpore reads compile inputs as whole tensors under ``full_batch`` and as one rank's slice
    under ``dataset_strategy``. So: a plan without a ``dataset_strategy``, or inputs of the
    plan's global shapes, give ``full_batch`` (MindSpore slices them for the first operators);
    inputs that are the per-rank slices of the plan's layout give that ``dataset_strategy``.
    Inputs after the plan's (a training cell's labels) get the first input's batch cut on their
    first axis.

    Args:
        plan: the plan.
        input_shapes: shape of every compiled input; ``None`` to take the plan's layout as is.

    Raises:
        PlanError: the inputs are neither the plan's global shapes nor their slices.
    """
    if plan.dataset_strategy is None:
        return None
    layout = [tuple(int(c) for c in s) for s in plan.dataset_strategy]
    if input_shapes is None:
        return tuple(layout)
    shapes = [tuple(int(d) for d in s) for s in input_shapes]
    planned = [tuple(s) for s in plan.input_shapes]
    n = len(layout)
    if shapes[:n] == planned[:n]:
        return None
    sliced = [tuple(d // c if isinstance(d, int) else d for d, c in zip(shape, cuts))
              for shape, cuts in zip(planned, layout)]
    if shapes[:n] != sliced[:n]:
        raise PlanError(f"inputs of shapes {shapes[:n]} are neither the plan's global shapes "
                        f"{planned[:n]} nor their per-rank slices {sliced[:n]}")
    batch_cut = layout[0][0] if layout and layout[0] else 1
    for shape in shapes[n:]:
        layout.append(tuple([batch_cut] + [1] * (len(shape) - 1)) if shape else ())
    return tuple(layout)


def apply_plan_context(plan: Plan, input_shapes: list | None = None) -> None:
    """The plan's parallel mode on ``plan.devices`` (semi_auto_parallel, or auto_parallel with
    sharding propagation for ``write_back="propagate"``:
    :func:`parallel_context`) with the data-input layout of
    :func:`dataset_layout` (``full_batch`` or ``dataset_strategy``)."""
    import mindspore as ms

    ms.set_auto_parallel_context(**parallel_context(plan), device_num=plan.devices)
    layout = dataset_layout(plan, input_shapes)
    if layout is None:
        ms.set_auto_parallel_context(full_batch=True)
    else:
        ms.set_auto_parallel_context(full_batch=False, dataset_strategy=layout)


def describe(plan: Plan) -> str:
    """One line for ``plan``/``explain`` output: the mode and why."""
    unreached = unreached_with_collectives(plan)
    if _mode(plan) == "propagate":
        why = (f"{len(unreached)} functional operators no shard() reaches are predicted to "
               f"communicate under the semi-auto default ({', '.join(unreached[:2])}"
               f"{' ...' if len(unreached) > 2 else ''})" if unreached else "requested")
        return ("write-back: propagate (auto_parallel, sharding_propagation seeded with the "
                f"{len(plan.strategies)} planned strategies): {why}; the predicted costs of "
                "those operators assume the semi-auto default")
    extra = (f"; {len(unreached)} functional operators keep MindSpore's default and are predicted"
             " to communicate (--write-back propagate would let MindSpore lay them out)"
             if unreached else "")
    return f"write-back: shard (semi_auto_parallel){extra}"
