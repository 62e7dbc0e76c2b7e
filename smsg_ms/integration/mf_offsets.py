"""mindformers' per-stage layer ``offset`` (``model_config.offset``) for a planned run.

mindformers 1.9.0 places its decoder layers on pipeline stages by
``parallel_core/training_graph/transformer/utils.py`` ``LayerSetting``: with ``p`` stages and
``v`` virtual stages (``pp_interleave_num``), chunk ``(i, s)`` (virtual stage ``i``, stage ``s``)
holds ``L // (p·v) + offset[i][s]`` layers, the chunks filled in order ``(0, 0), (0, 1), ...,
(1, 0), ...``; layer ``k`` is on stage ``searchsorted(accumulated, k + 1) % p``. Its checks
(``_check_inputs``): the offset's last axis has ``p`` entries (the one before it ``v``), they sum
to ``L mod (p·v)``, the first and last chunks hold no negative count and every middle chunk at
least one layer. With ``p·v = 1`` the offset is ignored.
"""
from __future__ import annotations

from bisect import bisect_left

from .plan_io import PlanError


def _rows(offset, stages: int, virtual: int) -> list[list[int]] | None:
    """``offset`` as ``virtual`` rows of ``stages`` ints (an int or a 1-D list broadcast, as
    mindformers broadcasts it), or ``None`` when its shape does not fit."""
    if isinstance(offset, bool):
        return None
    if isinstance(offset, int):
        return [[offset] * stages for _ in range(virtual)]
    if not isinstance(offset, list) or not offset:
        return None
    if all(isinstance(x, int) and not isinstance(x, bool) for x in offset):
        return [list(offset) for _ in range(virtual)] if len(offset) == stages else None
    if len(offset) == virtual and all(isinstance(r, list) and len(r) == stages
                                      and all(isinstance(x, int) for x in r) for r in offset):
        return [list(r) for r in offset]
    return None


def offset_fits(offset, layers: int, stages: int, virtual: int = 1) -> bool:
    """Whether mindformers accepts ``offset`` for ``layers`` decoder layers on ``stages``
    stages of ``virtual`` virtual stages (the checks of ``LayerSetting._check_inputs``, the sum
    taken over the offset as written, as mindformers takes it)."""
    chunks = stages * virtual
    if chunks <= 1:
        return True
    rows = _rows(offset, stages, virtual)
    if rows is None:
        return False
    written = offset if isinstance(offset, list) else [offset]
    flat_written = [x for r in written for x in (r if isinstance(r, list) else [r])]
    if sum(flat_written) != layers % chunks:
        return False
    counts = [layers // chunks + x for r in rows for x in r]
    return counts[0] >= 0 and counts[-1] >= 0 and all(c >= 1 for c in counts[1:-1])


def stage_offsets(layers: int, stages: int, virtual: int = 1):
    """The ``offset`` written for ``layers`` layers on ``stages`` stages (``virtual`` virtual
    stages each): ``0`` when ``stages·virtual`` divides ``layers``; otherwise the
    ``layers mod (stages·virtual)`` extra layers go one each to the chunks just before the
    last one (the first stage holds the embedding and, in 1F1B, the most micro-batches in
    flight; the last the output layer, the loss and any multi-token-prediction layer): a list
    of ``stages`` ints, or ``virtual`` such lists.

    Raises:
        PlanError: fewer layers than the chunks' middle ones need (one each).
    """
    chunks = stages * virtual
    extra = layers % chunks
    if chunks <= 1 or extra == 0:
        return 0
    flat = [0] * chunks
    for j in range(chunks - 1 - extra, chunks - 1):
        flat[j] = 1
    if not offset_fits([flat[i * stages:(i + 1) * stages] for i in range(virtual)]
                       if virtual > 1 else flat, layers, stages, virtual):
        raise PlanError(f"{layers} layers cannot be placed on {stages} pipeline stages"
                        f"{f' of {virtual} virtual stages' if virtual > 1 else ''}: mindformers "
                        "wants every middle stage to hold a layer")
    rows = [flat[i * stages:(i + 1) * stages] for i in range(virtual)]
    return rows if virtual > 1 else rows[0]


def stage_of_layers(layers: int, stages: int, offset=0, virtual: int = 1) -> list[int]:
    """The stage of each of ``layers`` layers under ``offset`` (mindformers' ``pp_ids``).

    Raises:
        PlanError: ``offset`` does not fit (:func:`offset_fits`).
    """
    if stages * virtual <= 1:
        return [0] * layers
    if not offset_fits(offset, layers, stages, virtual):
        raise PlanError(f"model_config.offset = {offset!r} does not fit {layers} layers on "
                        f"{stages} stages (mindformers: one entry per stage, summing to "
                        f"{layers} mod {stages * virtual})")
    rows = _rows(offset, stages, virtual)
    base = layers // (stages * virtual)
    accumulated, total = [], 0
    for r in rows:
        for x in r:
            total += base + x
            accumulated.append(total)
    return [bisect_left(accumulated, k + 1) % stages for k in range(layers)]


__all__ = ["offset_fits", "stage_of_layers", "stage_offsets"]
