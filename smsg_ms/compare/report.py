"""Markdown table and plot of comparison results (:func:`smsg_ms.compare.runner.compare`)."""
from __future__ import annotations

import textwrap


def _fmt_bytes(n) -> str:
    if n is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _fmt(x, spec=".3g") -> str:
    return "–" if x is None else format(x, spec)


def relative_costs(run: dict) -> dict[str, float | None]:
    """Neutral step cost of each planner divided by smsg's (``None`` where either failed)."""
    by = {r["planner"]: r for r in run["rows"]}
    base = by.get("smsg")
    ref = base["measures"]["step_seconds"] if base and base["ok"] else None
    return {name: (r["measures"]["step_seconds"] / ref if r["ok"] and ref else None)
            for name, r in by.items()}


def verdict(run: dict) -> str:
    """One line: is smsg no worse than the best other planner, and better than
    recursive_programming, on the neutral step cost."""
    by = {r["planner"]: r for r in run["rows"]}
    smsg = by.get("smsg")
    if not smsg or not smsg["ok"]:
        return f"smsg did not run: {smsg['error'] if smsg else 'not requested'}"
    mine = smsg["measures"]["step_seconds"]
    others = {n: r["measures"]["step_seconds"] for n, r in by.items() if n != "smsg" and r["ok"]}
    if not others:
        return "no other planner compiled"
    best = min(others, key=lambda n: (others[n], n))
    tol = 1e-9 * max(mine, others[best])
    head = (f"smsg is no worse than the best other planner ({best})" if mine <= others[best] + tol
            else f"smsg is WORSE than {best} by {100 * (mine / others[best] - 1):.1f} %")
    rp = others.get("recursive_programming")
    tail = ("" if rp is None else "; strictly better than recursive_programming" if mine < rp - tol
            else "; not better than recursive_programming")
    return head + tail


def _label(row: dict) -> str:
    """Planner name; smsg's row names a non-default write-back (``smsg (propagate)``), another
    planner's row how many primitives smsg scored per call."""
    name = row["planner"]
    if "write-back propagate" in row.get("notes", []):
        name += " (propagate)"
    split = (row.get("smsg_score") or {}).get("split")
    if split:
        name += f" ({len(split)} scored per call)"
    return name


def markdown(runs: list[dict]) -> str:
    """A section per (network, devices) with one row per planner, plus the verdict line."""
    out = []
    for run in runs:
        opts = ", ".join(f"{k}={v}" for k, v in run["options"].items())
        out.append(f"### {run['network']} on {run['devices']} devices"
                   + (f" ({opts})" if opts else "") + f", hardware {run['hardware']}\n")
        out.append("| planner | status | plan s | fwd comm | bwd comm | grad sync | FLOPs/dev "
                   "| param+opt mem | step s | vs smsg | smsg-predicted s | collectives matched |")
        out.append("|" + "---|" * 12)
        rel = relative_costs(run)
        for r in run["rows"]:
            if not r["ok"]:
                out.append(f"| {r['planner']} | failed: {r['error'].replace('|', '/')[:160]} |"
                           + " |" * 10)
                continue
            m = r["measures"]
            cb = m["collective_bytes"]
            pred = (r.get("smsg_score") or {}).get("step_seconds")
            fid = r.get("fidelity")
            out.append("| " + " | ".join([
                _label(r), "ok", _fmt(r["planning_seconds"], ".2f"),
                _fmt_bytes(sum(cb["forward"].values())), _fmt_bytes(sum(cb["backward"].values())),
                _fmt_bytes(sum(cb["grad_sync"].values())), _fmt(m["flops"]["total"], ".3e"),
                _fmt_bytes(m["memory"]["total"]), _fmt(m["step_seconds"], ".4g"),
                _fmt(rel.get(r["planner"]), ".3f"), _fmt(pred, ".4g"),
                f"{fid['matched']}/{fid['predicted']} (inserted {fid['inserted']})" if fid else "–",
            ]) + " |")
        rho = run.get("spearman")
        out.append("")
        out.append(f"Verdict: {verdict(run)}. Spearman ρ (smsg-predicted vs neutral): "
                   f"{_fmt(rho, '.2f')}.\n")
    return "\n".join(out)


def fit_to_width(text: str, width: int) -> str:
    """``text`` (:func:`markdown`) as it is when its widest line fits ``width`` columns, else
    each table row as a block, one ``header: value`` line per cell (indented under the row's
    first cell), so a narrow terminal wraps no table line and cuts no label. Lines that are not
    table rows are kept."""
    lines = text.splitlines()
    if not lines or max(len(line) for line in lines) <= width:
        return text
    out: list[str] = []
    header: list[str] = []
    for line in lines:
        if not line.startswith("|"):
            out.append(line)
            header = []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set("".join(cells)) <= set("-"):
            continue  # the separator row
        if not header:
            header = cells
            continue
        out.append(f"{cells[0]}:")
        for name, value in zip(header[1:], cells[1:]):
            if value:  # a long value (a failed planner's reason) wrapped between words
                out += textwrap.wrap(f"{name}: {value}", width, initial_indent="  ",
                                     subsequent_indent="    ", break_long_words=False)
    return "\n".join(out)


def plot(runs: list[dict], path) -> None:
    """Bar chart: neutral step cost of each planner per (network, devices), smsg = 1.0
    (matplotlib, Agg back end). Cases where smsg failed are drawn relative to the best planner."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    planners = sorted({r["planner"] for run in runs for r in run["rows"]},
                      key=lambda p: (p != "smsg", p))
    labels, table = [], []
    for run in runs:
        rel = relative_costs(run)
        if all(v is None for v in rel.values()):
            costs = {r["planner"]: r["measures"]["step_seconds"] for r in run["rows"] if r["ok"]}
            best = min(costs.values()) if costs else None
            rel = {k: v / best for k, v in costs.items()} if best else {}
        layers = run["options"].get("layers")
        labels.append(f"{run['network'].split(':')[-1]}" + (f" {layers}L" if layers else "")
                      + f"\n{run['devices']} dev")
        table.append([rel.get(p) or np.nan for p in planners])
    data = np.array(table, dtype=float).reshape(len(runs), len(planners))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(runs) + 2), 4))
    width = 0.8 / max(len(planners), 1)
    x = np.arange(len(runs))
    for i, p in enumerate(planners):
        ax.bar(x + i * width, data[:, i], width, label=p)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x + width * (len(planners) - 1) / 2, labels, fontsize=7)
    ax.set_ylabel("neutral step cost / smsg")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
