"""Overlap as MindSpore schedules it: gradient synchronisation next to the backward pass.

MindSpore inserts each trained parameter's gradient AllReduce (the bprop of its
``_MirrorOperator``, ``frontend/parallel/step_parallel.cc``) right behind the backward operator
that produces the gradient, and fuses neighbouring ones into buckets (``comm_fusion``, mode
``"auto"``: by size, 64 MB a bucket; ``mindspore.set_auto_parallel_context``). The buckets run on
the communication stream while the compute stream goes on with the backward of the operators
before them (in forward order), which do not depend on them; the optimizer waits for all of
them. Tensor-parallel collectives (the AllReduce of partial sums, redistributions) feed the next
operator, so they stay on the critical path: the cost model adds them to the forward and
backward time. Pipeline parallel accumulates the gradients over the micro-batches and
synchronises them once after the last one (``accu_grads``; MindSpore's pipeline-parallel
tutorial), so :mod:`.pipeline` keeps the stage's synchronisation after its last backward
micro-step, not overlapped.

Two forms of the same two-stream schedule:

* :func:`grad_sync_schedule`: the exact timeline of one backward pass: bucket ``j`` starts when
  its last gradient is ready and the previous bucket is done; what is left after the last
  backward kernel is exposed.
* :func:`exposed_grad_sync`: the per-operator form the search adds up (its objective is a sum
  over operators): an operator's synchronisation runs while the equal operator of the previous
  repeated layer (same strategy, same backward time) computes its backward, so it is exposed by
  ``max(0, sync − backward)``. Over a layer this is at least the steady state's
  ``max(0, Σ sync − Σ backward)``: the sum of the parts never under-counts.
"""
from __future__ import annotations

#: MindSpore's ``comm_fusion`` bucket size in ``"auto"`` mode: 64 MB
FUSION_THRESHOLD_BYTES = 64 * 2**20


def exposed_grad_sync(sync_seconds: float, backward_seconds: float) -> float:
    """Seconds of an operator's gradient synchronisation left after the backward computation it
    overlaps: ``max(0, sync − backward)`` (module docstring)."""
    return max(0.0, float(sync_seconds) - float(backward_seconds))


def fusion_buckets(grad_bytes, threshold: float = FUSION_THRESHOLD_BYTES) -> list[list[int]]:
    """Indices of the gradients (in the order the backward pass produces them) fused into each
    bucket: consecutive gradients while the bucket holds at most ``threshold`` bytes (a gradient
    larger than ``threshold`` is a bucket of its own); a gradient of 0 bytes (no
    synchronisation) joins no bucket.

    Raises:
        ValueError: ``threshold`` not positive.
    """
    if not threshold > 0:
        raise ValueError(f"fusion threshold must be positive, got {threshold!r}")
    buckets: list[list[int]] = []
    size = 0.0
    for i, nbytes in enumerate(grad_bytes):
        if nbytes <= 0:
            continue
        if buckets and size + nbytes <= threshold:
            buckets[-1].append(i)
            size += nbytes
        else:
            buckets.append([i])
            size = nbytes
    return buckets


def grad_sync_schedule(backward_seconds, sync_seconds, grad_bytes,
                       threshold: float = FUSION_THRESHOLD_BYTES) -> float:
    """Seconds the gradient synchronisation of one backward pass adds after its last kernel.

    Args:
        backward_seconds: per operator, in backward order, its backward time on the compute
            stream (kernels and its critical-path collectives).
        sync_seconds: per operator, the time of its gradient synchronisation (0: none).
        grad_bytes: per operator, the bytes of its gradients (what fusion counts).
        threshold: bytes per bucket (:data:`FUSION_THRESHOLD_BYTES`).

    Bucket ``j`` is ready when its last operator's backward ends; it starts at
    ``max(ready_j, end_{j−1})`` and lasts the sum of its members' times; the result is
    ``max(0, end_last − Σ backward_seconds)``.

    Raises:
        ValueError: the three sequences differ in length.
    """
    if not len(backward_seconds) == len(sync_seconds) == len(grad_bytes):
        raise ValueError("backward_seconds, sync_seconds and grad_bytes differ in length")
    done, t = [], 0.0
    for b in backward_seconds:
        t += float(b)
        done.append(t)
    end = 0.0
    for bucket in fusion_buckets(grad_bytes, threshold):
        end = max(done[bucket[-1]], end) + sum(float(sync_seconds[i]) for i in bucket)
    return max(0.0, end - t)
