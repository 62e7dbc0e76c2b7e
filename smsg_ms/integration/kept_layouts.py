"""A network's own ``Layout`` on a primitive whose layout only the network sets
(``self_define_shard``), fitted to the devices of one pipeline stage.

MindSpore requires the device matrix of every configured layout to multiply to the device count
of one stage ("The configured device_matrix {1, 4, 1, 2} accumulate value 8 dose not equal to
the device number in one stage 4", MindSpore 2.10's check of a configured layout, seen in
the dry-run of GLM2 pipelined). A network that writes its device matrix by hand (mindformers
GLM2's ``tile_kv``: ``Layout((1, 4, 1, 2), ...)``, 8 devices whatever the run) therefore fails
in any other stage size, and the plan cannot replace such a layout with a strategy
(``self_define_shard_info.cc`` accepts only a layout).

The fit keeps every tensor map and changes the device matrix only:

* more devices in the matrix than in the stage: each axis from the outermost (first) one on is
  divided by the common factor it shares with the excess. MindSpore numbers the ranks of a
  device matrix with its last axis varying fastest (``frontend/parallel/device_matrix.cc``, ``DeviceMatrix::GetDevicesAlongDim``), so the
  outer axes span the farthest ranks: those a pipeline gives to other stages. Fewer cuts keep
  every cut dimension divisible.
* fewer: the outermost axis no tensor map names (a replica axis) is multiplied by the shortfall:
  the slices stay as they were, more devices hold each.
* neither divides the other, or no replica axis to grow: left as it is (MindSpore's own error
  then names the layout).
"""
from __future__ import annotations

from math import gcd, prod

LAYOUT_ATTRS = ("in_layout", "out_layout")


def _used_axes(layouts) -> set[int]:
    """Device-matrix axes (counted from the left) any tensor map names; MindSpore's tensor maps
    count axes from the right (``-1``: not cut; a tuple: several axes on one dimension)."""
    used: set[int] = set()
    for layout in layouts:
        rank = len(layout["device_matrix"])
        for entry in layout["tensor_map"]:
            for axis in entry if isinstance(entry, (tuple, list)) else (entry,):
                if axis >= 0:
                    used.add(rank - 1 - axis)
    return used


def fitted_device_matrix(matrix: tuple, devices: int, used: set[int]) -> tuple | None:
    """``matrix`` (device counts per axis, outermost first) fitted to ``devices`` (see the module
    docstring); ``None`` when it cannot be fitted (or needs no change).

    Example: ``(1, 4, 1, 2)`` into 4 devices → ``(1, 2, 1, 2)``; into 16 with axis 2 a replica
    axis → ``(1, 4, 2, 2)``."""
    total = prod(matrix)
    if total == devices or devices < 1:
        return None
    dm = list(matrix)
    if total % devices == 0:
        excess = total // devices
        for i, n in enumerate(dm):
            g = gcd(n, excess)
            dm[i], excess = n // g, excess // g
        return tuple(dm) if excess == 1 else None
    if devices % total == 0:
        free = [i for i in range(len(dm)) if i not in used]
        if not free:
            return None
        dm[free[0]] *= devices // total
        return tuple(dm)
    return None


def fit_kept_layouts(prims: dict, stage_devices: int) -> dict[str, tuple]:
    """Fit the ``in_layout`` / ``out_layout`` of every ``self_define_shard`` primitive in
    ``prims`` (``{path: Primitive}``) whose device matrix does not multiply to
    ``stage_devices`` (devices of one pipeline stage; the device count without pipeline).

    Returns:
        ``{path: new device matrix}`` of the primitives changed, sorted by path.
    """
    changed = {}
    for path, prim in sorted(prims.items()):
        if prim.attrs.get("self_define_shard") is not True:
            continue
        layouts = [lay for attr in LAYOUT_ATTRS for lay in (prim.attrs.get(attr) or ())
                   if isinstance(lay, dict) and "device_matrix" in lay]
        matrices = {tuple(lay["device_matrix"]) for lay in layouts}
        if len(matrices) != 1:
            continue
        new = fitted_device_matrix(matrices.pop(), stage_devices, _used_axes(layouts))
        if new is None:
            continue
        for attr in LAYOUT_ATTRS:
            if prim.attrs.get(attr):
                prim.add_prim_attr(attr, tuple(dict(lay, device_matrix=new)
                                               for lay in prim.attrs[attr]))
        changed[path] = new
    return changed


def context_stage_devices() -> int | None:
    """Devices of one pipeline stage in MindSpore's auto-parallel context (``device_num //
    pipeline_stages``); ``None`` outside (semi-)auto parallel."""
    import mindspore as ms

    if ms.get_auto_parallel_context("parallel_mode") not in ("semi_auto_parallel",
                                                             "auto_parallel"):
        return None
    stages = max(int(ms.get_auto_parallel_context("pipeline_stages") or 1), 1)
    return int(ms.get_auto_parallel_context("device_num")) // stages
