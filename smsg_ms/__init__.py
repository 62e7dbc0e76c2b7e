"""smsg-ms: profiling-free auto-parallel strategy search for MindSpore.

Pipeline: graph capture (:mod:`smsg_ms.graph`) → symbolic cost model (:mod:`smsg_ms.cost`) →
strategy search (:mod:`smsg_ms.search`) → write-back (:mod:`smsg_ms.integration`).

Public API (MindSpore is imported only when these are called):
``set_auto_parallel_context``, ``AutoParallel``, ``apply_plan``, ``load_plan``, ``save_plan``,
``Plan``. Importing smsg_ms also lets MindSpore's own ``set_auto_parallel_context`` and
``AutoParallel`` take search mode ``"smsg"`` (:mod:`smsg_ms.integration.mindspore_switch`).
"""
from .version import __version__  # noqa: E402

from .plan import OpDecision, Plan, PlanError  # noqa: E402
from .integration.plan_io import load_plan, save_plan  # noqa: E402
from .integration.annotate import apply_plan  # noqa: E402
from .integration.context import AutoParallel, set_auto_parallel_context  # noqa: E402
from .integration.mindspore_switch import install as _install_mindspore_switch  # noqa: E402

# mindspore.set_auto_parallel_context(search_mode="smsg") and AutoParallel(net, parallel_mode=
# "smsg") work after ``import smsg_ms`` (patched when MindSpore is imported, not before)
_install_mindspore_switch()

__all__ = ["AutoParallel", "OpDecision", "Plan", "PlanError", "apply_plan", "load_plan",
           "save_plan", "score", "set_auto_parallel_context", "__version__"]


def score(network_spec, devices=None, strategies=None, hardware="ascend910b", *, config=None,
          plan=False, **network_options):
    """smsg's predicted cost of any planner's strategies (``strategies``: see
    :func:`smsg_ms.compare.score.score`), or of a hybrid configuration (``config``: a
    :class:`~smsg_ms.compare.configs.Config` or its text ``dp=2,tp=4,pp=1,micro_batch=1,
    global_batch=8``, expanded into the Megatron layout; ``devices``, when given, must equal
    ``dp·tp·pp``; ``plan=True`` adds the single-stage plan; see
    :func:`smsg_ms.compare.score_configs.score_config`). Returns a dict with
    ``step_seconds`` (seconds per training step) and ``memory_bytes`` (per device).

    Raises:
        ValueError: neither or both of ``strategies`` and ``config``; those of the two functions.
    """
    if (strategies is None) == (config is None):
        raise ValueError("score needs strategies or config, not both nor neither")
    if config is not None:
        from .compare.score_configs import score_config

        return score_config(network_spec, config, devices=devices, hardware=hardware,
                            plan=plan, **network_options)
    from .compare.score import score as _score

    return _score(network_spec, devices, strategies, hardware=hardware, **network_options)
