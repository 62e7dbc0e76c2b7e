"""The planner's errors (a device count MindSpore refuses has its own:
:class:`smsg_ms.devices.DeviceCountError`)."""
from __future__ import annotations

from ..errors import InputError


class PlanningError(ValueError):
    """The network cannot be planned as asked (memory, an operator with no option, a cost model
    of another graph)."""


class PipelinePlanningError(ValueError):
    """The network cannot be pipelined as asked (no repeated blocks, bad stage count ...)."""


class PipelineSettingsError(PipelinePlanningError, InputError):
    """Pipeline settings that do not go together whatever the network (stages not dividing the
    devices, micro-batches not dividing the global batch or fewer than the stages): bad input."""
