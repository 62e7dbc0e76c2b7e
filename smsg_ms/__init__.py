"""smsg-ms: profiling-free auto-parallel strategy search for MindSpore.

Pipeline: graph capture (:mod:`smsg_ms.graph`) → symbolic cost model (:mod:`smsg_ms.cost`) →
strategy search (:mod:`smsg_ms.search`) → write-back (:mod:`smsg_ms.integration`).
"""
__version__ = "0.1.0"
