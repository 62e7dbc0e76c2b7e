"""smsg-ms: profiling-free auto-parallel strategy search for MindSpore.

Pipeline: graph capture (:mod:`smsg_ms.graph`) → symbolic cost model (:mod:`smsg_ms.cost`) →
strategy search (:mod:`smsg_ms.search`) → write-back (:mod:`smsg_ms.integration`).
"""
__version__ = "0.1.0"


def score(network_spec, devices, strategies, hardware="ascend910b", **network_options):
    """smsg's predicted cost of any planner's strategies; see :func:`smsg_ms.compare.score.score`."""
    from .compare.score import score as _score

    return _score(network_spec, devices, strategies, hardware=hardware, **network_options)
