"""``smsg-ms check``: a plan file (or a MindSpore strategy file) compiled with MindSpore's parallel
compiler in the CPU dry-run, predicted and inserted collectives side by side (moved out of
:mod:`smsg_ms.cli`, which registers it)."""
from __future__ import annotations

from .cli_options import (UsageError, add_json_arg, add_size_args, given_options,
                          network_options, device_count, non_negative_int)
from .cli_output import console, emit_json, working


def register(sub) -> None:
    """Add ``check`` to an ``argparse`` sub-parser collection."""
    p = sub.add_parser("check", help="compile a plan with MindSpore's parallel compiler "
                                     "(CPU dry-run) and compare collectives")
    p.add_argument("file", help="plan file")
    ranks = p.add_mutually_exclusive_group()
    ranks.add_argument("--rank", type=non_negative_int, help="rank to compile (default 0; pipelined plans: "
                                                "the first rank of every stage)")
    ranks.add_argument("--all-ranks", action="store_true", help="compile every rank")
    p.add_argument("--network", help="network spec to check against (default: the plan's; "
                                      "required for a strategy file)")
    p.add_argument("--devices", type=device_count,
                   help="device count (strategy file only: FILE may also be a MindSpore "
                        "strategy checkpoint, e.g. from export)")
    add_size_args(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    """``check FILE``: a plan file compiled on its first rank (``--rank``, ``--all-ranks``; a
    pipelined plan: the first rank of every stage), or a strategy file
    (:func:`check_strategy_file_command`). Returns the exit status: 1 when the check fails.

    Raises:
        UsageError: network options with a plan file, a rank outside the plan's devices.
        smsg_ms.plan.PlanFileError: an unreadable plan.
    """
    from .integration.check import check_plan, print_report
    from .integration.plan_io import load_plan
    from .integration.strategy_check import read_strategy_file
    from .report.tables import count

    if read_strategy_file(args.file) is not None:
        return check_strategy_file_command(args)
    _refuse_other_json(args.file)
    if args.devices is not None or given_options(args) or args.shape:
        load_plan(args.file)   # a missing, unreadable or truncated file: that is the error
        raise UsageError("--devices and network options are for a strategy file: a plan file "
                         "carries its own")
    plan = load_plan(args.file)
    ranks = list(range(plan.devices)) if args.all_ranks else [args.rank or 0]
    if args.rank is None and not args.all_ranks and plan.pipeline:
        from .integration.pipeline import ranks_per_stage
        ranks = ranks_per_stage(plan.devices, int(plan.pipeline["stages"]))
    if not all(0 <= r < plan.devices for r in ranks):
        raise UsageError(f"--rank {args.rank} is outside the plan's ranks 0..{plan.devices - 1}")
    with working(f"compiling {count(len(ranks), 'rank')} with MindSpore's parallel compiler",
                 args.json):
        report = check_plan(plan, ranks, spec=args.network)
    if args.json:
        from .report.json_views import check_json
        emit_json(check_json(report))
        return 0 if report.ok else 1
    print_report(report, console())
    return 0 if report.ok else 1


def _refuse_other_json(path: str) -> None:
    """Refuse a JSON object that is neither a plan file nor a strategy checkpoint, saying which
    two ``check`` reads (anything that is not a JSON object: :func:`~.integration.plan_io.
    load_plan` says what it is).

    Raises:
        smsg_ms.plan.PlanFileError: a JSON object with neither ``decisions`` nor
            ``parallel_strategy_item``.
    """
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and not {"decisions", "parallel_strategy_item"} & set(data):
        from .plan import PlanFileError
        raise PlanFileError(f"{path}: neither a plan file (no 'decisions') nor a MindSpore "
                            "strategy checkpoint (no 'parallel_strategy_item'): give a plan file "
                            "from 'smsg-ms plan' or a strategy checkpoint from 'smsg-ms export' "
                            "or MindSpore's strategy_ckpt_config save_file")


def check_strategy_file_command(args) -> int:
    """``check STRATEGY.json --network SPEC --devices N``: :mod:`smsg_ms.integration.
    strategy_check`.

    Raises:
        UsageError: ``--network`` or ``--devices`` missing.
    """
    from .integration.strategy_check import check_strategy_file, print_strategy_report

    missing = [(what, flag) for what, flag, absent in (
        ("network", "--network", not args.network),
        ("device count", "--devices", args.devices is None)) if absent]
    if missing:
        raise UsageError(f"{args.file} is a strategy file, which names no "
                         f"{' or '.join(w for w, _ in missing)}: give "
                         f"{' and '.join(f for _, f in missing)}")
    options = network_options(args)
    with working(f"compiling {args.network} with {args.file}", args.json):
        report = check_strategy_file(args.file, args.network, args.devices, options)
    if args.json:
        emit_json({"ok": True, "file": report.path, "network": report.network,
                   "devices": report.devices, "strategies": report.strategies,
                   "collectives": report.collectives})
        return 0
    print_strategy_report(report, console())
    return 0
