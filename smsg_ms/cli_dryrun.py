"""``smsg-ms dryrun SCRIPT [--ranks N] [--rank R] [-- ARGS]``: a user's training script compiled
with MindSpore's parallel compiler on this CPU machine (moved out of :mod:`smsg_ms.cli`, which
registers it and splits the script's own arguments off at ``--``)."""
from __future__ import annotations

from .cli_options import add_json_arg, non_negative_int, positive_int
from .cli_output import console, emit_json, working
from .words import count


def register(sub) -> None:
    """Add ``dryrun`` to an ``argparse`` sub-parser collection."""
    p = sub.add_parser("dryrun", help="compile a training script with MindSpore's parallel "
                                      "compiler on this CPU machine (one step, simulated ranks)")
    p.add_argument("script", help="the training script (run unmodified)")
    p.add_argument("--ranks", type=positive_int, default=8, help="simulated ranks (default 8)")
    p.add_argument("--rank", type=non_negative_int, default=0, help="the rank compiled (default 0)")
    # the script's own arguments follow "--" (split off in main(): argparse's sub-parsers do
    # not pass "--" on); they reach the script untouched
    p.set_defaults(args=[])
    p.epilog = "the script's own arguments follow --: smsg-ms dryrun train.py --ranks 8 -- --lr 0.1"
    add_json_arg(p)
    p.set_defaults(func=cmd_dryrun)


def cmd_dryrun(args) -> int:
    """``dryrun SCRIPT [--ranks N] [--rank R] [-- ARGS]``: :mod:`smsg_ms.integration.
    script_dryrun`."""
    from .integration.plan_io import PlanError
    from .integration.script_dryrun import dryrun_script

    if not 0 <= args.rank < args.ranks:
        raise PlanError(f"--rank {args.rank} is outside 0..{args.ranks - 1}")
    script_args = args.args
    with working(f"compiling {args.script} as rank {args.rank} of {args.ranks}", args.json):
        result = dryrun_script(args.script, script_args, args.ranks, args.rank)
    if args.json:
        emit_json({"script": args.script, "ranks": args.ranks, "rank": args.rank, **result})
        return 0 if result["ok"] else 1
    if not result["ok"]:
        raise PlanError(f"MindSpore rejected {args.script} on rank {args.rank} of {args.ranks}: "
                        + (result["reason"] or result["error"]))
    from .integration.strategy_check import collectives_table
    from .report.units import fmt_bytes

    out = console()
    out.print(collectives_table(result["collectives"],
                                f"{args.script}, rank {args.rank} of {args.ranks}: collectives "
                                "MindSpore inserted"))
    out.print(f"parameters and optimizer state per device: {fmt_bytes(result['parameter_bytes'])}"
              f" ({count(len(result['parameters']), 'parameter')}; activations not counted)")
    step = "training step" if result["training"] else "graph (no training step compiled)"
    out.print(f"dryrun: compiled ({result['cell']} {step}, "
              f"{count(len(result['strategies']), 'operator strategy', 'operator strategies')})")
    return 0
