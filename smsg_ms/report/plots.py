"""Where the predicted step goes, layer by layer (matplotlib, Agg backend).

Bars: one per block instance (``layers.0``, ``layers.1`` ...), plus the operators before the first
block (embedding ...) and after it (head ...). Top panel: seconds stacked by kind (computation, each collective kind,
redistribution) from the decisions' ``breakdown``; bottom panel: memory bytes per device stacked by
kind (breakdown keys naming memory or bytes).
"""
from __future__ import annotations

from collections import OrderedDict

from ..plan import Plan
from .tables import LABELS, is_memory_key, relative_name


def layer_sums(plan: Plan) -> tuple[list[str], "OrderedDict[str, list[float]]",
                                    "OrderedDict[str, list[float]]"]:
    """``(bar labels, {time kind: seconds per bar}, {memory kind: bytes per bar})``."""
    labels: list[str] = []
    index: dict[str, int] = {}
    per_bar: list[dict[str, float]] = []
    seen_block = False
    for d in plan.decisions:
        _, instance = relative_name(d)
        if instance is not None:
            seen_block = True
            label = d.block.replace("*", instance)
        else:
            label = "after blocks" if seen_block else "before blocks"
        if label not in index:
            index[label] = len(labels)
            labels.append(label)
            per_bar.append({})
        sums = per_bar[index[label]]
        for key, value in d.breakdown.items():
            if isinstance(value, (int, float)):
                sums[key] = sums.get(key, 0.0) + float(value)
    kinds = sorted({k for sums in per_bar for k in sums})
    time = OrderedDict((k, [s.get(k, 0.0) for s in per_bar]) for k in kinds if not is_memory_key(k))
    mem = OrderedDict((k, [s.get(k, 0.0) for s in per_bar]) for k in kinds if is_memory_key(k))
    return labels, time, mem


def plot_plan(plan: Plan, path: str) -> None:
    """Write the stacked-bar PNG to ``path`` (written atomically).

    Raises:
        smsg_ms.integration.plan_io.PlanError: the folder is missing or not writable.
    """
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..integration.plan_io import write_bytes_atomic

    labels, time, mem = layer_sums(plan)
    fig, (ax_t, ax_m) = plt.subplots(2, 1, figsize=(max(6, 0.6 * len(labels) + 3), 7),
                                     sharex=True)
    x = range(len(labels))
    for ax, series, scale, unit in ((ax_t, time, 1e3, "ms"), (ax_m, mem, 2.0 ** -20, "MiB")):
        bottom = [0.0] * len(labels)
        for kind, values in series.items():
            scaled = [v * scale for v in values]
            ax.bar(x, scaled, bottom=bottom, label=LABELS.get(kind, kind))
            bottom = [b + v for b, v in zip(bottom, scaled)]
        ax.set_ylabel(unit)
        if series:
            ax.legend(fontsize="small", ncol=2)
        else:
            ax.text(0.5, 0.5, "no breakdown in the plan", ha="center", transform=ax.transAxes)
    ax_t.set_title(f"{plan.network}, {plan.devices} devices: predicted time per step")
    ax_m.set_title("memory per device")
    ax_m.set_xticks(list(x))
    ax_m.set_xticklabels(labels, rotation=45, ha="right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())
