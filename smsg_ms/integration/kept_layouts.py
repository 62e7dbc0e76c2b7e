"""A network's own ``Layout`` on a primitive whose layout only the network sets
(``self_define_shard``), fitted to the devices of one pipeline stage.

MindSpore requires the device matrix of every configured layout to multiply to the device count
of one stage ("The configured device_matrix {1, 4, 1, 2} accumulate value 8 dose not equal to
the device number in one stage 4", MindSpore 2.10's check of a configured layout, seen in
the dry-run of GLM2 pipelined). A network that writes its device matrix by hand (mindformers
GLM2's ``tile_kv``: ``Layout((1, 4, 1, 2), ...)``, 8 devices whatever the run) therefore fails
in any other stage size, and the plan cannot replace such a layout with a strategy
(``self_define_shard_info.cc`` accepts only a layout).

The fit keeps every tensor map and changes the device matrix only
(:func:`smsg_ms.cost.kept_layout.fitted_device_matrix`; neither divisible: left as it is, and
MindSpore's own error then names the layout).
"""
from __future__ import annotations

from ..cost.kept_layout import fitted_device_matrix, used_axes

LAYOUT_ATTRS = ("in_layout", "out_layout")


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
        new = fitted_device_matrix(matrices.pop(), stage_devices, used_axes(layouts))
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
