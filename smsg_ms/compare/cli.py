"""``smsg-ms compare`` and ``smsg-ms score``; the lead hooks :func:`register` into ``smsg_ms.cli``."""
from __future__ import annotations

import argparse
import json
import shutil

from ..words import count


def _note(line: str) -> None:
    """One line to stderr (the scored CSV may be on stdout)."""
    import sys

    print(f"note: {line}", file=sys.stderr)


def _expert(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--expert wants dp,mp[,pp] integers, got '{text}'")
    if not 2 <= len(dims) <= 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"--expert wants dp,mp[,pp] positive integers, got "
                                         f"'{text}'")
    return dims


def _options(args) -> dict:
    from ..cli_options import network_options
    return network_options(args)


def cmd_compare(args) -> int:
    from .report import fit_to_width, markdown
    from .runner import PLANNERS, compare

    from ..cli_output import check_writable, emit_json, progress_steps

    from ..cli_options import UsageError, apply_mindformers_config

    run = apply_mindformers_config(args)
    if args.network is None:
        raise UsageError("compare needs a network or --mindformers-config RUN.yaml")
    if run is not None and args.expert is None:
        # the run's own parallel_config, one pipeline stage: the expert row
        par = run.get("parallel_config") or {}
        args.expert = (int(par.get("data_parallel", 1)), int(par.get("model_parallel", 1)))
        if args.devices is None:
            args.devices = args.expert[0] * args.expert[1]
    if args.devices is None:
        raise UsageError("compare needs --devices N")
    planners = tuple(args.planners.split(",")) if args.planners else PLANNERS
    from ..cli_options import canonical_hardware
    args.hardware = canonical_hardware(args.hardware)   # the header shows the preset's name
    to_stdout = args.json == "-"
    if args.json and not to_stdout:     # refused before any compile, not after all of them
        check_writable(args.json)
    steps = len(planners) + (1 if args.expert and "expert" not in planners else 0)
    options = _options(args)
    # a bar on a terminal's stderr, nothing in a pipe; what MindSpore prints goes to stderr
    # with --json (stdout holds the JSON document only)
    with progress_steps(f"compiling {args.network} on {args.devices} devices", steps,
                        to_stdout, args.quiet) as step:
        run = compare(args.network, args.devices, planners=planners, hardware=args.hardware,
                      expert=args.expert, timeout=args.timeout, write_back=args.write_back,
                      progress=step, **options)
    if to_stdout:
        emit_json(run)
        return 0
    # the markdown table where it fits the terminal (COLUMNS in a pipe), a block per planner
    # where it does not
    print(fit_to_width(markdown([run]), shutil.get_terminal_size((1000, 24)).columns))
    if args.json:
        from ..integration.plan_io import write_text_atomic
        write_text_atomic(args.json, json.dumps(run, sort_keys=True, indent=1))
    return 0


def cmd_score(args) -> int:
    from ..cli_options import UsageError, apply_mindformers_config, machine_of
    from ..cli_output import check_writable, emit_json, working

    run = apply_mindformers_config(args)
    if args.out:        # refused before any capture
        check_writable(args.out)
    if args.network is None:
        raise UsageError("score needs a network or --mindformers-config RUN.yaml")
    args.hardware = machine_of(args, UsageError)
    if run is not None:
        return _score_run(args, run)
    shape = _options(args)
    if args.out and not args.configs:
        raise UsageError("--out goes with --configs FILE.csv")
    if args.configs:
        import sys

        from .score_configs import score_csv

        shape.pop("batch", None)      # a row's batch is micro_batch·dp
        try:
            src = open(args.configs, newline="", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read {args.configs}: {exc.strerror}") from exc
        with src:
            if args.out:
                import os
                import tempfile

                # written next to the target and renamed: an interrupted run leaves no half file
                folder = os.path.dirname(os.path.abspath(args.out))
                with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, newline="",
                                                 suffix=".csv.tmp") as dst:
                    try:
                        rows, errors = score_csv(args.network, src, dst, hardware=args.hardware,
                                                 note=_note, **shape)
                    except BaseException:       # a refused file or an interrupt: no temporary
                        os.unlink(dst.name)
                        raise
                os.replace(dst.name, args.out)
                print(f"{count(rows, 'configuration')} scored ({errors} with an error) -> "
                      f"{args.out}")
            else:
                score_csv(args.network, src, sys.stdout, hardware=args.hardware, note=_note,
                          **shape)
        return 0
    if args.config:
        from .score_configs import score_config

        shape.pop("batch", None)
        with working(f"capturing and scoring {args.network}", args.json):
            result = score_config(args.network, args.config, devices=args.devices,
                                  hardware=args.hardware, **shape)
        if args.json:
            emit_json({"network": args.network, "config": args.config, **result})
            return 0
        from .configs import parse_config

        rows = [("strategies", f"{count(result['pinned'], 'primitive')} pinned by the layout, "
                               f"{result['filled']} filled by the model")]
        if result["fallback"]:
            rows.append(("left to the model", "layout strategy not offered: "
                         + ", ".join(result["fallback"])))
        args.show_score(args.config, result, parse_config(args.config).pp, rows)
        return 0
    from .score import read_network_strategies, score

    if args.devices is None:
        raise UsageError("score needs --devices N (or --config / --configs FILE.csv)")
    with working(f"capturing and scoring {args.network}", args.json):
        strategies = read_network_strategies(args.network, args.devices, **shape)
        if not strategies:
            raise ValueError(f"network '{args.network}' carries no shard() strategy to score")
        result = score(args.network, args.devices, strategies, hardware=args.hardware, **shape)
    if args.json:
        emit_json({"network": args.network, "devices": args.devices,
                   "strategies": strategies, **result})
        return 0
    rows = [("primitives with a strategy", f"{len(strategies)} ({result['pinned']} pinned, "
                                           f"{result['filled']} filled by the model)")]
    rows += [(kind, ", ".join(result[kind])) for kind in ("unknown", "unavailable")
             if result[kind]]
    args.show_score(f"{args.network} on {count(args.devices, 'device')}, its own strategies",
                    result, 1, rows)
    return 0


def _score_run(args, run: dict) -> int:
    """``score --mindformers-config RUN.yaml``: the YAML's own configuration priced
    (:func:`smsg_ms.compare.run_config.config_of_run`), at the depth and widths given; a MoE
    model's ``expert_parallel`` added (:func:`_expert_parallel_delta`)."""
    from ..cli_options import UsageError
    from ..cli_output import emit_json, working
    from .run_config import config_of_run, expert_parallel_of
    from .score_configs import ShapeScorer

    if args.config or args.configs:
        raise UsageError("--mindformers-config carries its own configuration: no --config or "
                         "--configs")
    config, notes = config_of_run(run)
    ep = expert_parallel_of(run)
    shape = _options(args)
    shape.pop("batch", None)
    with working(f"capturing and scoring {args.mindformers_config}", args.json):
        if args.devices is not None:
            config.validate(devices=args.devices)
        scorer = ShapeScorer(args.network, args.hardware, dict(shape))
        result = scorer.score(config)
        expert = _expert_parallel_delta(scorer, config, ep)
    if expert is not None:
        result["step_seconds"] += expert["seconds"]
        result["memory_bytes"] += expert["memory_bytes"]
        result["expert_parallel"] = ep
        notes.append(f"expert_parallel = {ep}: AlltoAll {expert['alltoall_seconds']:.4g} s, "
                     f"expert gradient sync {expert['grad_sync_seconds']:+.4g} s, memory "
                     f"{expert['memory_bytes'] / 2**20:+.1f} MiB against ep = 1")
    elif ep > 1:
        notes.append(f"expert_parallel = {ep}: the model has no expert layers, not priced")
    if args.json:
        emit_json({"mindformers_config": args.mindformers_config, "config": config.text(),
                   "notes": notes, **result})
        return 0
    args.show_score(f"{config.text()} (from {args.mindformers_config})", result, config.pp,
                    [("note", note) for note in notes])
    return 0


def _expert_parallel_delta(scorer, config, ep: int) -> dict | None:
    """The step's change at expert parallel ``ep`` against 1
    (:func:`smsg_ms.cost.expert_dispatch.expert_parallel_delta`) on the scorer's stage graph,
    or ``None`` without mindformers' expert layers.

    Raises:
        ConfigError: ``ep`` does not divide ``dp·tp`` or the expert count (mindformers refuses).
    """
    from ..cost.expert_dispatch import expert_layout, expert_parallel_delta
    from .configs import ConfigError

    batch, devices = config.micro_batch * config.dp, config.dp * config.tp
    stage = scorer.stage(batch, devices)
    layout = expert_layout(stage.graph, batch)
    if layout is None:
        return None
    try:
        return expert_parallel_delta(layout, stage.model, ep, stages=config.pp,
                                     micro_batches=config.micro_batches,
                                     sharding=config.optimizer_shard)
    except ValueError as exc:
        raise ConfigError(f"parallel_config.expert_parallel: {exc}") from None


def _network_args(p, devices_required: bool = True) -> None:
    p.add_argument("network", nargs=None if devices_required else "?",
                   help="built-in name or package.module:function")
    from ..cli_options import device_count
    p.add_argument("--devices", type=device_count, required=devices_required,
                   help="device count" + ("" if devices_required else
                                          " (score --config: must equal dp·tp·pp; compare "
                                          "--mindformers-config: default data_parallel·"
                                          "model_parallel of the YAML)"))
    from ..cli_options import DEFAULT_HARDWARE, HARDWARE_HELP
    p.add_argument("--hardware", default=DEFAULT_HARDWARE, metavar="NAME|FILE",
                   help=HARDWARE_HELP)
    from ..cli_options import add_size_args
    add_size_args(p)


def _show_plain(subject: str, result: dict, stages: int, extra: list) -> None:
    """``show_score``'s default: the subject and the result's step and memory, one line."""
    print(f"{subject}: step {result['step_seconds']} s, memory {result['memory_bytes']} bytes "
          "per device" + "".join(f"; {label}: {value}" for label, value in extra))


def register(subparsers, show_score=None) -> None:
    """Add ``compare`` and ``score`` to an ``argparse`` sub-parser collection. ``show_score``
    prints a scored configuration (``show_score(subject, result, stages, extra rows)``, the
    report layer's :func:`smsg_ms.report.score_view.show_score`, given by the command line,
    which this layer does not import); default: ``subject: result`` on one line."""
    from ..cli_options import positive_int, positive_seconds
    p = subparsers.add_parser("compare", help="compile a network under every planner (smsg and "
                              "MindSpore's) and measure each from the compiled graph")
    _network_args(p, devices_required=False)
    from ..cli_options import add_mindformers_arg
    add_mindformers_arg(p)
    p.add_argument("--planners", help="comma-separated subset (default: all)")
    p.add_argument("--expert", type=_expert, help="dp,mp[,pp] of the network's own parallel "
                   "config (mindformers specs): adds the expert row")
    p.add_argument("--timeout", type=positive_seconds, default=900.0, metavar="S",
                   help="seconds per compile (default 900)")
    p.add_argument("--write-back", choices=("auto", "shard", "propagate"), default="auto",
                   help="how smsg's plan reaches MindSpore (default auto: see smsg-ms plan)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="the full results as JSON: on stdout alone (nothing else there), or "
                        "also written to FILE after the table")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (there is none in a pipe either)")
    p.set_defaults(func=cmd_compare)
    s = subparsers.add_parser("score", help="score with smsg's cost model the strategies a "
                              "network's primitives carry (shard() in its code), or hybrid "
                              "configurations in the Megatron layout (--config, --configs, "
                              "--mindformers-config)")
    _network_args(s, devices_required=False)
    s.add_argument("--devices-per-node", type=positive_int, metavar="N",
                   help="devices per node, overriding the preset's")
    from ..cli_options import add_mindformers_arg
    add_mindformers_arg(s)
    s.add_argument("--json", action="store_true",
                   help="print the result as JSON on stdout (nothing else on stdout)")
    how = s.add_mutually_exclusive_group()
    how.add_argument("--config", help="dp=D,tp=T,pp=P,micro_batch=B,global_batch=G"
                     "[,recompute=true][,optimizer_shard=true]: price this configuration "
                     "(micro_batch: samples per micro-batch per data-parallel replica)")
    how.add_argument("--configs", metavar="FILE.csv", help="price every row (UTF-8 CSV, "
                     "columns devices,global_batch,micro_batch,tp,dp,pp; optional recompute, "
                     "optimizer_shard, layers, hidden, heads, seq, vocab, ffn, name; no other): "
                     "the same rows with step_seconds and error added, CSV to stdout or --out")
    s.add_argument("-o", "--out", help="with --configs: write the CSV here instead of stdout")
    s.set_defaults(func=cmd_score, show_score=show_score or _show_plain)
