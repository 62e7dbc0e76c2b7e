"""``smsg-ms compare`` and ``smsg-ms score``; the lead hooks :func:`register` into ``smsg_ms.cli``."""
from __future__ import annotations

import argparse
import json


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
    from .report import markdown
    from .runner import PLANNERS, compare

    from ..cli_output import emit_json, stdout_to_stderr

    planners = tuple(args.planners.split(",")) if args.planners else PLANNERS
    to_stdout = args.json == "-"
    # progress lines go to stderr with --json (stdout holds the JSON document only)
    with stdout_to_stderr(to_stdout):
        run = compare(args.network, args.devices, planners=planners, hardware=args.hardware,
                      expert=args.expert, timeout=args.timeout, write_back=args.write_back,
                      progress=lambda p: print(f"… {p}", flush=True) if not args.quiet else None,
                      **_options(args))
    if to_stdout:
        emit_json(run)
        return 0
    print(markdown([run]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(run, fh, sort_keys=True, indent=1)
    return 0


def cmd_score(args) -> int:
    from ..cli_output import emit_json, working
    from .score import read_network_strategies, score

    with working(f"capturing and scoring {args.network}", args.json):
        strategies = read_network_strategies(args.network, args.devices, **_options(args))
        if not strategies:
            raise ValueError(f"network '{args.network}' carries no shard() strategy to score")
        result = score(args.network, args.devices, strategies, hardware=args.hardware,
                       **_options(args))
    if args.json:
        emit_json({"network": args.network, "devices": args.devices,
                   "strategies": strategies, **result})
        return 0
    print(f"{len(strategies)} primitives carry strategies; predicted step "
          f"{result['step_seconds']:.6g} s, memory {result['memory_bytes'] / 2**20:.1f} MiB per "
          f"device ({result['pinned']} pinned, {result['filled']} filled by the model)")
    for kind in ("unknown", "unavailable"):
        if result[kind]:
            print(f"{kind}: {', '.join(result[kind])}")
    return 0


def _network_args(p) -> None:
    p.add_argument("network", help="built-in name or package.module:function")
    p.add_argument("--devices", type=int, required=True, help="device count")
    p.add_argument("--hardware", default="ascend910b", help="hardware preset (ascend910b, a100, "
                   "h100)")
    from ..cli_options import add_size_args
    add_size_args(p)


def register(subparsers) -> None:
    """Add ``compare`` and ``score`` to an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser("compare", help="compile a network under every planner (smsg and "
                              "MindSpore's) and measure each from the compiled graph")
    _network_args(p)
    p.add_argument("--planners", help="comma-separated subset (default: all)")
    p.add_argument("--expert", type=_expert, help="dp,mp[,pp] of the network's own parallel "
                   "config (mindformers specs): adds the expert row")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per compile")
    p.add_argument("--write-back", choices=("auto", "shard", "propagate"), default="auto",
                   help="how smsg's plan reaches MindSpore (default auto: see smsg-ms plan)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="the full results as JSON: on stdout alone (nothing else there), or "
                        "also written to FILE after the table")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_compare)
    s = subparsers.add_parser("score", help="score the strategies a network's primitives carry "
                              "(shard() in its code) with smsg's cost model")
    _network_args(s)
    s.add_argument("--json", action="store_true",
                   help="print the result as JSON on stdout (nothing else on stdout)")
    s.set_defaults(func=cmd_score)
