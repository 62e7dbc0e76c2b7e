"""``smsg-ms export``: a plan file written as MindSpore's strategy checkpoint JSON, with the
``set_auto_parallel_context`` arguments that load it (moved out of :mod:`smsg_ms.cli`, which
registers it)."""
from __future__ import annotations

from .cli_options import add_json_arg
from .cli_output import check_writable, emit_json, working


def register(sub) -> None:
    """Add ``export`` to an ``argparse`` sub-parser collection."""
    p = sub.add_parser("export", help="write a plan as MindSpore's strategy checkpoint JSON")
    p.add_argument("file", help="plan file")
    p.add_argument("out", help="strategy checkpoint file (.json), for strategy_ckpt_config "
                               "load_file")
    p.add_argument("--network", help="network spec (default: the plan's)")
    add_json_arg(p)
    p.set_defaults(func=cmd_export)


def primitives_reading_parameters(plan, graph) -> list[str]:
    """The plan's primitives the strategy checkpoint can hold: those whose operator reads a
    Parameter directly (``smsg_ms.integration.strategy_files``: the key names that Parameter)."""
    return sorted({op.prim_path for op in graph.ops if op.prim_path in plan.strategies
                   and any(graph.tensors[n].kind == "parameter" for n in op.inputs)})


def context_of(plan, out: str) -> dict:
    """The ``mindspore.set_auto_parallel_context`` arguments that load ``out`` for ``plan``:
    :func:`smsg_ms.integration.strategy_files.load_context` and the data inputs' layout
    (``full_batch``, or ``dataset_strategy``: MindSpore reads it from the context, not the
    file)."""
    from .integration.strategy_files import load_context

    layout = ({"full_batch": True} if plan.dataset_strategy is None else
              {"full_batch": False, "dataset_strategy": tuple(tuple(int(c) for c in s)
                                                              for s in plan.dataset_strategy)})
    return {**load_context(plan, out), **layout}


def cmd_export(args) -> int:
    """``export PLAN OUT``: capture the plan's network, write the checkpoint, say what it holds
    and how to load it (``--json``: ``file``, ``written`` and ``not_written`` primitives,
    ``context``). Returns 0.

    Raises:
        smsg_ms.integration.plan_io.PlanError: an unreadable plan, an unwritable ``OUT``.
    """
    from .graph.capture import capture_network
    from .integration.plan_io import load_plan
    from .integration.strategy_files import write_strategy_ckpt
    from .report.tables import count

    plan = load_plan(args.file)
    check_writable(args.out)
    network = args.network or plan.network
    with working(f"capturing {network}", args.json):
        graph = capture_network(network, world=plan.built_for, **plan.build_options())
        write_strategy_ckpt(plan, graph, args.out)
    written = primitives_reading_parameters(plan, graph)
    left = sorted(set(plan.strategies) - set(written))
    context = context_of(plan, args.out)
    from .planner.stages import unsharded_across_stages
    rec = plan.pipeline or {}
    whole = unsharded_across_stages(rec.get("shared_parameters"),
                                    bool(rec.get("optimizer_sharding")))
    if args.json:
        extra = {"parallel_optimizer_off": whole} if whole else {}
        emit_json({"file": args.out, "plan": args.file, "network": network,
                   "written": written, "not_written": left, "context": context, **extra})
        return 0
    print(f"strategy checkpoint written to {args.out}: {len(written)} of "
          f"{count(len(plan.strategies), 'strategy', 'strategies')} written")
    if left:
        from .report.plan_notes import fold_name
        folded = list(dict.fromkeys(fold_name(n) for n in left))
        shown = ", ".join(folded[:4]) + (f" and {len(folded) - 4} more" if len(folded) > 4
                                         else "")
        print(f"not in the file ({len(left)}: they read no Parameter, and the format names a "
              f"primitive by the Parameter it reads): {shown}")
    kwargs = ", ".join(f"{k}={v!r}" for k, v in context.items())
    print(f"load it with mindspore.set_auto_parallel_context({kwargs})")
    if whole:   # MindSpore 2.10 cannot optimizer-shard a parameter read on two stages
        print(f"and set Parameter.parallel_optimizer = False on {', '.join(whole)} (read on two "
              "pipeline stages: sharded, MindSpore 2.10's compile fails; smsg-ms explain says "
              "why)")
    return 0
