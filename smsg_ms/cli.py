"""smsg-ms command line: graph, plan (main job), explain, check, export, dryrun, compare, score.

Every command turns a known failure into one line on stderr: exit 2 for bad input (a flag, a
file given, a network spec: :class:`smsg_ms.errors.InputError`, as argparse's own), exit 1 for
a network that cannot be planned or a failed check; ``--debug`` shows the traceback. A closed
stdout (``| head``) ends a command quietly with exit 0.
"""
from __future__ import annotations

import argparse
import os
import sys

from .cli_check import register as register_check
from .cli_explain import register as register_explain
from .cli_dryrun import register as register_dryrun
from .cli_export import register as register_export
from .cli_options import (DEFAULT_HARDWARE, HARDWARE_HELP,  # noqa: F401
                          add_json_arg, add_mindformers_arg,
                          add_pipeline_shape_args, add_size_args, apply_mindformers_config,
                          UsageError, auto_or_count, canonical_hardware, default_plan_path, device_count,
                          given_options, machine_of, name_options, positive_float, positive_int,
                          positive_seconds)
from .cli_options import OneLineParser as _Parser
from .cli_output import check_writable, console, emit_json, stdout_to_stderr, working
from .cli_options import network_options as _network_options
from .networks import BUILTINS, DEFAULT_NETWORK
from .search.effort import DEFAULT_SECONDS as DEFAULT_TIME_LIMIT


def _add_network_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("network", nargs="?", default=DEFAULT_NETWORK,
                   help=f"built-in name ({', '.join(sorted(BUILTINS))}) or package.module:function "
                        f"(default: {DEFAULT_NETWORK})")
    add_size_args(p)


def cmd_graph(args) -> int:
    from .graph.capture import capture_network
    from .report.graph_summary import print_summary

    options = _network_options(args)
    with working(f"capturing {args.network}", args.json):
        graph = capture_network(args.network, **options)
    if args.json:
        from .report.json_views import graph_json
        emit_json(graph_json(graph, args.network, options))
        return 0
    print_summary(graph, console())
    return 0


#: ``plan``'s default settings: a setting differing from these goes into the default file name.
PLAN_DEFAULTS = {"hardware": DEFAULT_HARDWARE, "write_back": "auto", "optimizer_sharding": "auto",
                 "virtual_stages": "1"}


def _plan_settings(args) -> dict:
    """The planning settings of ``args`` that differ from :data:`PLAN_DEFAULTS` (or are given)."""
    settings = {"pipeline": args.pipeline, "micro_batches": args.micro_batches,
                "memory": args.memory,
                # a plan under another work limit may differ: it must not overwrite this one
                "time_limit": None if args.time_limit == DEFAULT_TIME_LIMIT else args.time_limit}
    for key, default in PLAN_DEFAULTS.items():
        value = getattr(args, key)     # the hardware's default by its name or its alias
        same = canonical_hardware(value) if key == "hardware" else value
        settings[key] = None if str(same).lower() == default else str(value).lower()
    if settings["hardware"] is not None and settings["hardware"].endswith(
            (".json", ".yaml", ".yml")):      # a description file: its stem
        settings["hardware"] = os.path.splitext(os.path.basename(settings["hardware"]))[0]
    settings["devices_per_node"] = args.devices_per_node
    settings["replace_strategies"] = "replaced" if args.replace_strategies else None
    # built for the plan's devices is the default: only the opt-out is named
    settings["build_for_devices"] = None if args.build_for_devices else "unbuilt"
    return settings


def _add_hardware_args(p) -> None:
    """``--hardware NAME|FILE`` and ``--devices-per-node N`` (:mod:`smsg_ms.cost.hardware`)."""
    p.add_argument("--hardware", default=DEFAULT_HARDWARE, metavar="NAME|FILE",
                   help=HARDWARE_HELP)
    p.add_argument("--devices-per-node", type=positive_int, metavar="N",
                   help="devices per node, overriding the preset's (default: the preset's)")


def cmd_plan(args) -> int:
    from .integration.plan_io import PlanError, save_plan

    run = apply_mindformers_config(args)
    if args.out is not None and not args.out.strip():
        raise UsageError("--out must name a file, got an empty name")
    args.machine = machine_of(args, UsageError)
    from .networks import check_options
    check_options(args.network, _network_options(args))
    import os
    out = args.out or default_plan_path(
        os.path.basename(args.mindformers_config).rsplit(".", 1)[0] if run else args.network,
        args.devices, name_options(args), _plan_settings(args))
    check_writable(out)
    try:
        from . import planner
    except ImportError as exc:     # a broken installation (e.g. numpy missing)
        raise PlanError(f"the planner is not available in this installation ({exc})") from exc
    if args.pipeline is None and (args.micro_batches is not None or args.virtual_stages != "1"
                                  or args.optimizer_sharding != "auto"):
        raise UsageError("--micro-batches, --optimizer-sharding and --virtual-stages need "
                        "--pipeline (use --pipeline 1 for one stage)")
    graph = None
    if args.pipeline is None:
        from .graph.capture import capture_network

        options = _network_options(args)
        with working(f"capturing {args.network}", args.json):
            graph = capture_network(args.network, **options,
                                    world=args.devices if args.build_for_devices else None)
        from .search import NoFeasiblePlan
        try:
            with stdout_to_stderr(args.json):   # the planner draws its own bar on a terminal
                plan = planner.plan_graph(graph, args.devices, hardware=args.machine,
                                          memory_gib=args.memory, options=options,
                                          network=args.network, write_back=args.write_back,
                                          time_limit=args.time_limit,
                                          replace_strategies=args.replace_strategies)
        except NoFeasiblePlan as exc:
            raise NoFeasiblePlan(f"{exc}; {_memory_hint(graph, args.network)}") from None
    else:
        with working(f"planning {args.network} with pipeline stages", args.json):
            plan = _plan_pipelined(args)
        from .planner.write_back import set_write_back
        set_write_back(plan, args.write_back)
    if run:     # mindformers' MoE layers: the expert-parallel degree, a run-level choice
        from .integration.mindformers_run import apply_expert_parallel
        graph = apply_expert_parallel(plan, graph)
    save_plan(plan, out)
    if run:     # the strategy checkpoint and the planned copy of the run configuration
        from .integration.mindformers_run import write_run_outputs
        mf = write_run_outputs(plan, args.mindformers_config, out, graph)
    from .integration.writeback import describe
    from .report.tables import print_summary
    if args.json:
        from .report.json_views import plan_json
        emit_json({**plan_json(plan, out), **({"mindformers": mf} if run else {})})
        return 0
    out_console = console()
    print_summary(plan, out_console)
    out_console.print(describe(plan), markup=False)
    out_console.print(f"plan written to {out}")
    if run:
        out_console.print(f"strategy checkpoint written to {mf['strategy_ckpt']}\nmindformers "
                          f"configuration written to {mf['yaml']}: parallel_config "
                          f"{mf['settings']['parallel_config']}", markup=False)
    return 0


def _memory_hint(graph, network: str) -> str:
    """What to try when one stage does not fit: pipeline stages where the network has repeated
    blocks and a global batch to split, else more memory or devices."""
    from .planner import PipelinePlanningError
    from .planner.stages import block_of_ops

    try:
        blocks = len(block_of_ops(graph)[0])
    except PipelinePlanningError:
        blocks = 0
    if blocks > 1 and _batch_parameter(network) is not None:
        return (f"the network has {blocks} repeated blocks: --pipeline auto also searches "
                "pipeline stages, micro-batches, recompute and optimizer sharding")
    return "give more --devices or a larger --memory (one stage is all this network allows)"


def _batch_parameter(network: str):
    """The ``batch`` parameter of the network's function (``inspect.Parameter``), or ``None``
    when it takes none: pipelining re-captures the network per micro-batch size."""
    import inspect

    from .networks import resolve_spec

    return inspect.signature(resolve_spec(network)[1]).parameters.get("batch")


def _plan_pipelined(args):
    """``--pipeline auto|P``: the outer pipeline search (``--batch`` is the global batch)."""
    from .integration.plan_io import PlanError
    from .planner import plan_network_pipelined

    stages = args.pipeline if args.pipeline == "auto" else None
    if stages is None:
        try:
            stages = int(args.pipeline)
        except ValueError:
            raise UsageError(f"--pipeline must be 'auto' or a stage count, got "
                             f"{args.pipeline!r}") from None
    options = _network_options(args)
    batch = options.pop("batch", None)
    param = _batch_parameter(args.network)
    if param is None:       # the search re-captures the network per micro-batch size
        raise PlanError(f"--pipeline needs a network with a 'batch' option (it is captured "
                        f"once per micro-batch size); '{args.network}' has none")
    if batch is None:       # the network function's default batch
        if not isinstance(param.default, int):
            raise UsageError(f"network '{args.network}' has no default batch: give --batch")
        batch = param.default
    return plan_network_pipelined(args.network, args.devices, global_batch=int(batch),
                                  stages=stages, micro_batches=args.micro_batches,
                                  hardware=args.machine, memory_gib=args.memory,
                                  optimizer_sharding={"on": True, "off": False, "auto": None}
                                  .get(args.optimizer_sharding, args.optimizer_sharding),
                                  virtual_stages=None if args.virtual_stages == "auto"
                                  else int(args.virtual_stages),
                                  time_limit=args.time_limit,
                                  replace_strategies=args.replace_strategies,
                                  build_for_devices=args.build_for_devices, **options)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="smsg-ms", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("graph", help="capture a network and summarise its operator graph")
    _add_network_args(p)
    add_json_arg(p)
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("plan", help="plan a network and write a plan file")
    _add_network_args(p)
    p.add_argument("--devices", type=device_count, default=8,
                   help="device count: 1, 2, 4 or a multiple of 8 (MindSpore's rule; default 8)")
    add_mindformers_arg(p)
    _add_hardware_args(p)
    p.add_argument("--memory", type=positive_float, metavar="GIB",
                   help="memory per device in GiB (default: preset's)")
    p.add_argument("--time-limit", type=positive_seconds, metavar="S", default=DEFAULT_TIME_LIMIT,
                   help=f"seconds of search work (default {DEFAULT_TIME_LIMIT:g}); past it the "
                        "plan is the best found, with its proven optimality gap")
    p.add_argument("-o", "--out", help="plan file (default <network>[-<option><value>]-<N>dev"
                                 "[-p<P>][-mb<M>][-os<on|off>][-<hardware>][-mem<GiB>]"
                                 "[-<write-back>].plan.json; the bracketed parts only for "
                                 "options and settings given or not at their default)")
    p.add_argument("--pipeline", metavar="auto|P", type=auto_or_count, help="pipeline stages: a count or 'auto' "
                                                       "(outer search); --batch is the global batch")
    p.add_argument("--micro-batches", type=positive_int, metavar="M",
                   help="micro-batches per step with --pipeline (default: searched)")
    add_pipeline_shape_args(p)
    p.add_argument("--write-back", choices=("auto", "shard", "propagate"), default="auto",
                   help="shard: semi_auto_parallel; propagate: sharding propagation seeded with "
                        "the plan (reaches functional calls); auto (default): propagate when "
                        "functional calls are predicted to communicate")
    p.add_argument("--replace-strategies", action="store_true",
                   help="plan anew the primitives whose strategy the network's own shard() "
                        "sets (default: kept as fixed choices where they fit the devices)")
    p.add_argument("--build-for-devices", action=argparse.BooleanOptionalAction, default=True,
                   help="(default) capture the network built for the plan's devices per "
                        "stage (--devices / stages), as MindSpore's compile builds it: a "
                        "network that reads the world size while built (mindformers' "
                        "parallel_core models: data_parallel) is captured once per stage size; "
                        "one that does not is captured as before (--no-build-for-devices: "
                        "built for the capture's one device, file name -unbuilt)")
    add_json_arg(p)
    p.set_defaults(func=cmd_plan)

    register_explain(sub)
    register_check(sub)

    register_export(sub)

    register_dryrun(sub)

    from .compare.cli import register as register_compare
    from .report.score_view import show_score
    register_compare(sub, show_score=show_score)
    return parser


def _user_modules_from_cwd() -> None:
    """Let ``package.module:function`` specs name modules in the working folder, here and in the
    dry-run child processes (which run in a temporary folder), as ``python -m`` would."""
    import os

    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if cwd not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join(parts + [cwd])


def _closed_stdout() -> int:
    """The reader of stdout went away (``smsg-ms explain p.json | head``): not an error. Point
    stdout at devnull so Python's flush at exit does not fail again (Python docs, "Note on
    SIGPIPE")."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    _user_modules_from_cwd()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = []
    if "dryrun" in argv and "--" in argv[argv.index("dryrun"):]:
        cut = argv.index("--", argv.index("dryrun"))
        argv, script_args = argv[:cut], argv[cut + 1:]
    args = parser.parse_args(argv)
    if script_args:
        args.args = script_args
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .devices import device_count_note
    from .errors import InputError
    devices = getattr(args, "devices", None)
    note = device_count_note(devices) if isinstance(devices, int) else None
    if note:    # accepted, but what it assumes is said (the flag's help names only the rule)
        print(f"note: {note}", file=sys.stderr)
    try:
        return args.func(args)
    except InputError as exc:   # bad input (a flag, a file given, a spec): as argparse's, exit 2
        if args.debug:
            raise
        parser.usage_error(args, str(exc))
    except BrokenPipeError:
        return _closed_stdout()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line unless --debug
        if args.debug:
            raise
        print(f"smsg-ms: error: {exc}".splitlines()[0] if len(str(exc)) < 800
              else f"smsg-ms: error: {str(exc)[:800]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
