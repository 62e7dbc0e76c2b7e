"""Long-context planning (issue #17 item 2): where sequence and context parallel win, and by
how much memory.

The built-in ``llama`` at LLaMA-3-8B widths (hidden 4096, 32 heads, 8 KV heads, ffn 14336),
``--layers`` decoder layers (default 2: planning only, nothing is compiled at these sizes
beyond the capture's shapes), batch 1, sequence 32k and 128k, on ``--devices`` Atlas 800T A2
devices (64 GiB each). Each row is the same search problem with some options forbidden (their
cost set to infinity), solved under the device's memory:

* ``tp``: tensor parallel only: no option cuts a sequence axis (a dimension whose size is a
  multiple of the sequence) of an input, no out_strategy (Megatron-LM without sequence
  parallel: the token stream whole on every device of a tensor-parallel group);
* ``tp+sp``: sequence parallel added: norms, residual additions and element-wise operators may
  cut the tokens, the row-parallel MatMuls reduce-scatter onto them (out_strategy); MatMuls,
  BatchMatMuls and the attention's 4-D operators still read whole sequences;
* ``tp+sp+cp``: the whole search: the attention's queries cut along the sequence as well
  (context parallel: each device attends its query chunk to the gathered keys and values).

Columns: the fastest plan under the device's memory (its step and memory; where none fits,
the least-memory plan's), and the least memory the variant can reach at all (the exact
memory-only optimum: where sequence and context parallel win memory). Figures are per device for the captured layers (activations grow with
the layer count; parameters, gradients and optimizer state too).

``--attention flash-causal`` builds the attention as one ``FlashAttentionScore`` (BSH, causal
``sparse_mode`` 2: no ``S×S`` scores stored; its query-sequence cut priced at the slowest
split's unmasked work) in place of the BatchMatMuls (``plain``, the default).

    python scripts/long_context.py [--devices 8] [--layers 2] [--seqs 32768 131072]
                                   [--attention plain|flash|flash-causal]
"""
from __future__ import annotations

import argparse
import math
import time

GIB = 2 ** 30
WIDTHS = dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000, dtype="float16")
ATTENTION_RANK = 4
MATMULS = ("MatMul", "BatchMatMul")


def _cuts_sequence(graph, op, option, seq: int) -> bool:
    """Whether ``option`` cuts a sequence axis of one of ``op``'s activation inputs."""
    for name, layout in zip(op.inputs, option.in_layouts):
        t = graph.tensors[name]
        if t.kind in ("parameter", "constant"):
            continue
        for size, cut in zip(t.shape, layout.cuts):
            if cut > 1 and isinstance(size, int) and size >= seq and size % seq == 0:
                return True
    return False


def _forbidden(graph, var, option, seq: int, variant: str) -> bool:
    op = var.ops[0]
    if variant == "tp+sp+cp":
        return False
    if variant == "tp":
        return option.out_strategy is not None or _cuts_sequence(graph, op, option, seq)
    # tp+sp: the MatMuls and the attention's 4-D operators read whole sequences
    attention = op.type == "FlashAttentionScore" or any(
        len(graph.tensors[n].shape) == ATTENTION_RANK for n in op.inputs)
    if op.type in MATMULS or attention:
        return _cuts_sequence(graph, op, option, seq)
    return False


def plan_row(graph, devices: int, seq: int, variant: str) -> dict:
    """Step seconds and bytes per device of the best plan of ``variant`` under the device's
    memory, or the least memory it reaches when none fits."""
    import numpy as np

    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import build_problem
    from smsg_ms.planner.variables import repeated_variable_groups
    from smsg_ms.search import solve
    from smsg_ms.search.problem import NoFeasiblePlan
    from smsg_ms.search.solve import solve_exact

    model = CostModel(graph, devices, "ascend910b")
    problem, variables = build_problem(graph, model)
    for var, pvar in zip(variables, problem.variables):
        bad = [i for i, calls in enumerate(var.options)
               if _forbidden(graph, var, calls[0], seq, variant)]
        if bad:
            pvar.cost = np.array(pvar.cost, dtype=float)
            pvar.cost[bad] = math.inf
    repeated = repeated_variable_groups(graph, problem, variables)
    try:
        least = solve_exact(problem, repeated=repeated, memory_only=True)
    except NoFeasiblePlan:  # FlashAttentionScore on more devices than batch × heads, no S1 cut
        return {"variant": variant, "fits": False, "step": math.nan, "memory": math.nan,
                "least": math.nan, "reduce_scatter_matmuls": 0, "cp": 0}
    try:
        choice = solve(problem, memory_limit=model.hardware.memory, repeated=repeated,
                       progress=False).choice
        fits = True
    except NoFeasiblePlan:
        choice, fits = least, False
    sp = sum(1 for var, o in zip(variables, choice) if var.options[o][0].out_strategy)
    cp = max((_query_cut(graph, var.ops[0], var.options[o][0], seq)
              for var, o in zip(variables, choice)), default=1)
    return {"variant": variant, "fits": fits, "step": problem.total(choice),
            "memory": problem.memory(choice), "least": problem.memory(least),
            "reduce_scatter_matmuls": sp, "cp": cp}


def _query_cut(graph, op, option, seq: int) -> int:
    """The cut of the sequence axis of a FlashAttentionScore's query (1 for other operators)."""
    if op.type != "FlashAttentionScore":
        return 1
    t = graph.tensors[op.inputs[0]]
    return max((cut for size, cut in zip(t.shape, option.in_layouts[0].cuts) if size == seq),
               default=1)


def main(argv=None) -> None:
    from smsg_ms.graph.capture import capture_network

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seqs", type=int, nargs="+", default=[32768, 131072])
    parser.add_argument("--attention", choices=("plain", "flash", "flash-causal"),
                        default="plain")
    args = parser.parse_args(argv)
    print(f"llama {WIDTHS}, {args.attention} attention, {args.layers} layers, batch 1, "
          "Atlas 800T A2 (64 GiB)")
    print(f"{'seq':>7} {'dev':>4} {'variant':<9} {'fits':<5} {'step (s)':>9} {'GiB':>8} "
          f"{'RS MatMuls':>10} {'FA cp':>5} {'least GiB':>10} {'vs tp':>6}")
    for seq in args.seqs:
        graph = capture_network("llama", batch=1, seq=seq, layers=args.layers,
                                attention=args.attention, **WIDTHS)
        for devices in args.devices:
            t0 = time.perf_counter()
            rows = [plan_row(graph, devices, seq, v) for v in ("tp", "tp+sp", "tp+sp+cp")]
            base = next((r["least"] for r in rows if r["least"] == r["least"]), math.nan)
            for r in rows:
                print(f"{seq:>7} {devices:>4} {r['variant']:<9} {'yes' if r['fits'] else 'no':<5} "
                      f"{r['step']:>9.3f} {r['memory'] / GIB:>8.2f} "
                      f"{r['reduce_scatter_matmuls']:>10} {r['cp']:>5} {r['least'] / GIB:>10.2f} "
                      f"{r['least'] / base:>6.3f}")
            print(f"{'':>12}({time.perf_counter() - t0:.0f} s: three searches)")


if __name__ == "__main__":
    main()
