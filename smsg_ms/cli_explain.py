"""``smsg-ms explain``: per-operator strategies, costs and runner-ups of a plan file, with
``--plot`` and ``--stays-best`` (moved out of :mod:`smsg_ms.cli`, which registers it)."""
from __future__ import annotations

from .cli_options import (add_json_arg, add_pipeline_shape_args, auto_or_count,
                          positive_int)
from .cli_output import check_writable, console, emit_json


def register(sub) -> None:
    """Add ``explain`` to an ``argparse`` sub-parser collection."""
    p = sub.add_parser("explain", help="per-operator strategies, costs and runner-ups of a plan")
    p.add_argument("file", help="plan file")
    p.add_argument("--plot", metavar="PNG", help="also draw time and memory per layer")
    p.add_argument("--all", action="store_true",
                   help="show every block instance (default: a primitive with one strategy "
                        "in every instance of its block is shown once)")
    p.add_argument("--stays-best", action="store_true",
                   help="also the range of the preset's bandwidth and latency (as factors) over "
                        "which the plan stays the cheapest of its single-operator deviations, and "
                        "which takes over beyond each end (captures the network again)")
    p.add_argument("--runner-up", action="store_true",
                   help="also the runner-up configuration and its predicted difference: "
                        "single-stage plan, the best plan whose data-parallel degree differs "
                        "(captures the network again and solves once per other degree); "
                        "pipelined plan, the best other (stages, micro-batches, optimizer "
                        "level, virtual stages) of the pipeline search run without pruning, with "
                        "its dp and tp")
    g = p.add_argument_group("the pipelined runner-up's search space (as given to plan; "
                             "default --pipeline auto)")
    g.add_argument("--pipeline", metavar="auto|P", type=auto_or_count, help="pipeline stages: a count or 'auto'")
    g.add_argument("--micro-batches", type=positive_int, metavar="M",
                   help="micro-batches per step (default: searched)")
    g.add_argument("--memory", type=float, metavar="GIB",
                   help="per-device memory limit in GiB (default: the preset's)")
    add_pipeline_shape_args(g)
    add_json_arg(p)
    p.set_defaults(func=cmd_explain,
                   space_defaults={k: p.get_default(k) for k in _SPACE_FLAGS})


#: ``explain``'s flags of the pipelined runner-up's search space, in ``plan``'s order
_SPACE_FLAGS = ("pipeline", "micro_batches", "optimizer_sharding", "virtual_stages", "memory")


def cmd_explain(args) -> int:
    """``explain FILE``: the plan's view (:mod:`smsg_ms.report.explain_view`), or its JSON; with
    ``--plot PNG`` the plot; with ``--stays-best`` the factor ranges of
    :func:`smsg_ms.planner.stays_best.plan_stays_best`; with ``--runner-up`` the runner-up
    configuration of :func:`smsg_ms.planner.runner_up.plan_runner_up` (single-stage plans) or
    of :func:`smsg_ms.planner.pipeline_runner_up.pipelined_runner_up` (plans with a pipeline
    record, in the search space ``--pipeline`` ... ``--memory`` give; in ``--json`` it
    replaces the record's ``runner_up``). Returns the exit status (0).

    Raises:
        smsg_ms.integration.plan_io.PlanError: an unreadable plan, an unwritable ``--plot``,
            a bad ``--pipeline``.
        ValueError: ``--stays-best`` or ``--runner-up`` on a plan it cannot reproduce.
    """
    from .integration.plan_io import load_plan
    from .report.explain_view import print_explain

    plan = load_plan(args.file)
    _refuse_unused_space_flags(args, plan)
    if args.plot:
        check_writable(args.plot)
    from .integration.writeback import describe

    if args.plot:
        from .report.plots import plot_plan
        plot_plan(plan, args.plot)
    ranges = None
    if args.stays_best:
        from .planner.stays_best import plan_stays_best
        ranges = plan_stays_best(plan)
    runner, space_note = None, {}
    if args.runner_up and plan.pipeline:
        from .planner.pipeline_runner_up import runner_up_plan, single_configuration
        from .report.degrees import chosen_degrees
        flags, space, runner = _pipelined_runner_up(args, plan)
        if runner is not None:      # its stage plan's degrees
            degrees = chosen_degrees(runner_up_plan(plan, runner, space))
            runner.update(dp=degrees["dp"], tp=degrees["tp"])
        space_note = dict(space=flags, alone=single_configuration(space))
    elif args.runner_up:
        from .planner.runner_up import plan_runner_up
        from .report.degrees import chosen_degrees
        runner = plan_runner_up(plan, int(chosen_degrees(plan)["dp"]))
    if args.json:
        from .report.json_views import explain_json
        data = explain_json(plan, show_all=args.all)
        if ranges is not None:     # JSON has no infinity: an unbounded end is null
            data["stays_best"] = [{k: (None if v == float("inf") else v) for k, v in r.items()}
                                  for r in ranges]
        if args.runner_up:
            data["runner_up"] = runner
        emit_json(data)
        return 0
    out_console = console()
    print_explain(plan, out_console, show_all=args.all,
                  record_runner_up=not (args.runner_up and plan.pipeline))
    out_console.print(describe(plan), markup=False)
    if ranges is not None:
        from .report.explain_view import print_stays_best
        print_stays_best(ranges, plan.hardware, out_console)
    if args.runner_up:
        from .report.explain_view import runner_up_configuration_line
        out_console.print(runner_up_configuration_line(runner, bool(plan.pipeline), **space_note),
                          markup=False)
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0


def _refuse_unused_space_flags(args, plan) -> None:
    """A search-space flag (``--pipeline`` ... ``--memory``) given where nothing reads it: only
    ``--runner-up`` of a pipelined plan searches a space.

    Raises:
        smsg_ms.cli_options.UsageError: such a flag without ``--runner-up`` or on a plan without
            a pipeline record.
    """
    from .cli_options import UsageError

    given = [f"--{k.replace('_', '-')}" for k in _SPACE_FLAGS
             if getattr(args, k) != args.space_defaults[k]]
    if given and not (args.runner_up and plan.pipeline):
        where, todo = (("without --runner-up", "leave them out, or add --runner-up")
                       if not args.runner_up else
                       ("on a plan without a pipeline", "leave them out (a single-stage plan's "
                        "runner-up is searched in its own space)"))
        raise UsageError(f"{', '.join(given)} given {where}: explain reads them only for "
                         f"--runner-up of a pipelined plan (its search space); {todo}")


def _pipelined_runner_up(args, plan):
    """``(the search space's flags, its PlanningOptions, the runner-up or None)`` of a
    pipelined plan: in the space the flags give; with none given, in the first of
    :func:`~smsg_ms.planner.pipeline_runner_up.own_spaces` that reproduces the plan (the plan
    file does not record its search space).

    Raises:
        smsg_ms.planner.pipeline_runner_up.NotReproducedError: no such space reproduces it.
    """
    from .planner.pipeline_runner_up import NotReproducedError, own_spaces, pipelined_runner_up

    given = [f"--{k.replace('_', '-')} {getattr(args, k)}" for k in _SPACE_FLAGS
             if getattr(args, k) != args.space_defaults[k]]
    if given:
        space = _pipeline_space(args, plan)
        return " ".join(given), space, pipelined_runner_up(plan, space)
    tried = []
    for flags, space in own_spaces(plan):
        try:
            return flags, space, pipelined_runner_up(plan, space)
        except NotReproducedError:
            tried.append(flags)
    raise NotReproducedError(
        f"the pipeline search does not choose this plan's configuration in any of the search "
        f"spaces tried ({'; '.join(tried)}): pass explain the --pipeline, --micro-batches, "
        "--optimizer-sharding, --virtual-stages and --memory the plan was made with")


def _pipeline_space(args, plan):
    """The :class:`~smsg_ms.planner.PlanningOptions` of the pipelined runner-up's search
    space from ``explain``'s flags (virtual stages searched when the plan chose ``v > 1`` and
    ``--virtual-stages`` is left at 1).

    Raises:
        smsg_ms.cli_options.UsageError: a ``--pipeline`` that does not divide the plan's
            devices, ``--micro-batches`` that do not divide its global batch."""
    from .cli_options import UsageError
    from .planner import PlanningOptions

    stages = args.pipeline or "auto"
    if stages != "auto":
        stages = int(stages)
        if plan.devices % stages:
            raise UsageError(f"--pipeline {stages} does not divide the plan's {plan.devices} "
                             "devices: give a divisor of it or 'auto'")
    batch = plan.pipeline.get("global_batch")
    if args.micro_batches and isinstance(batch, int) and batch % args.micro_batches:
        raise UsageError(f"--micro-batches {args.micro_batches} does not divide the plan's "
                         f"global batch {batch}: give a divisor of it")
    v = args.virtual_stages
    chosen_v = int(plan.pipeline.get("virtual_stages", 1))
    return PlanningOptions(memory_gib=args.memory, stages=stages,
                           micro_batches=args.micro_batches,
                           optimizer_sharding={"on": True, "off": False, "auto": None}
                           .get(args.optimizer_sharding, args.optimizer_sharding),
                           virtual_stages=None if v == "auto" or (v == "1" and chosen_v > 1)
                           else int(v))
