"""Memory traffic per parameter a device holds, once per step or per micro-batch: the
optimizer's update and the gradient accumulation (issue #16: per-step work that grows with
the parameters per device, ``P/(tp·pp)``, memory-bound: a few FLOPs per element against tens
of bytes). Units: seconds; bytes per element from the caller's ``bytes_per``
(``parameter``, ``gradient``, ``optimizer``). A mixin of :class:`smsg_ms.cost.pipeline.Links`,
which supplies ``machine``, ``hbm_bandwidth`` and ``main_grad_bytes``."""
from __future__ import annotations

from .kernels import update_traffic

#: Optimizer-state sharding levels (``None``: off): MindSpore 2.10's ``optimizer_level`` values.
OPTIMIZER_LEVELS = ("level1", "level2", "level3")


def optimizer_level(sharding) -> str | None:
    """The level a search setting means: ``False``/``None`` → ``None`` (off), ``True`` →
    ``"level1"`` (``enable_parallel_optimizer`` alone), a name of :data:`OPTIMIZER_LEVELS` →
    itself.

    Raises:
        ValueError: any other value.
    """
    if sharding is None or sharding is False or sharding == "off":
        return None
    if sharding is True:
        return "level1"
    if sharding in OPTIMIZER_LEVELS:
        return str(sharding)
    raise ValueError(f"optimizer sharding must be off, on or one of {', '.join(OPTIMIZER_LEVELS)}"
                     f", got {sharding!r}")


class ParamTraffic:
    """HBM time of the per-parameter work of a training step (mixed into ``Links``)."""

    def hbm(self) -> float:
        """Bytes/s between a device's memory and its compute units: the machine's
        ``hbm_bandwidth``, else :attr:`hbm_bandwidth` (``None``: memory traffic not priced)."""
        if self.machine is not None:
            return self.machine.hbm_bandwidth
        return self.hbm_bandwidth or 0.0

    def update_seconds(self, param, bytes_per: dict, sharded) -> float:
        """The optimizer's update of ``param`` (a :class:`~smsg_ms.cost.pipeline.ParamSlice`)
        once per step: over the elements this device updates (the slice, or ``1/r`` of it when
        optimizer-sharded at any level) it reads and writes the weight and the optimizer state
        (``bytes_per["parameter"]``, ``["optimizer"]``; with
        :data:`~smsg_ms.cost.pipeline.MIXED_PRECISION_ADAM` the fp32 master weight and the two
        moments) and reads the gradient (or the ``main_grad_bytes`` accumulator) twice (the
        global norm of gradient clipping, then the update): ``2·(parameter + optimizer) +
        2·gradient`` bytes per element over the HBM bandwidth (:meth:`hbm`). Sources:
        MindSpore's ``AdamWeightDecay`` (``mindspore/python/mindspore/nn/optim/adam.py``,
        ``_fused_adam_weight_decay``: the fused op reads param, m, v, gradient and writes param,
        m, v), ``ops.clip_by_global_norm`` (one read of every gradient); ZeRO (Rajbhandari et
        al. 2020, §3) for the 12-byte fp32 state. ``sharded`` is already restricted to
        shardable parameters."""
        bw = self.hbm()
        if not bw:
            return 0.0
        share = param.elements / (param.replicas if optimizer_level(sharded) else 1)
        grad = self.main_grad_bytes or bytes_per["gradient"]
        return share * update_traffic(bytes_per["parameter"], bytes_per["optimizer"], grad) / bw

    def accumulate_seconds(self, param, bytes_per: dict, sharded) -> float:
        """Per micro-batch, adding the micro-batch's gradient of ``param`` into its accumulator
        (MindSpore's ``accu_grads``, an ``AssignAdd`` per parameter and micro-batch in the
        pipelined graph; Megatron's ``main_grad``): read the accumulator and the new gradient,
        write the accumulator, ``3·gradient`` bytes per element over the HBM bandwidth
        (:meth:`hbm`), over the whole slice, or ``1/r`` of it at levels 2 and 3 (the
        accumulator is sharded and the gradient ReduceScattered before the add:
        :meth:`smsg_ms.cost.pipeline.Links.micro_sync_seconds`). With ``main_grad_bytes`` the
        accumulator has that many bytes per element and the gradient is added as DeepSpeed's
        bf16 optimizer adds it, ``hp_grad.data.add_(lp.grad.data.to(hp_grad.dtype))``
        (``BF16_Optimizer.update_hp_grads`` in ``deepspeed/runtime/bf16_optimizer.py``, called
        after every micro-batch's backward by the pipeline engine): the cast reads the
        gradient and writes an fp32 copy (``gradient + main``), the add reads the accumulator
        and the copy and writes the accumulator (``3·main``): ``gradient + 4·main_grad_bytes``.
        Only a step of several
        micro-batches accumulates (:func:`smsg_ms.cost.pipeline.chunks_cost`)."""
        bw = self.hbm()
        if not bw:
            return 0.0
        level = optimizer_level(sharded)
        share = param.elements / (param.replicas if level in ("level2", "level3") else 1)
        if self.main_grad_bytes:     # cast to a separate fp32 copy, then add it
            return share * (bytes_per["gradient"] + 4 * self.main_grad_bytes) / bw
        return share * 3 * bytes_per["gradient"] / bw
