"""``smsg-ms`` command line: ``graph``, ``plan`` (the main job) and friends.

Every command turns a known failure into one line on stderr and a non-zero exit; ``--debug``
shows the traceback.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter

from .networks import BUILTINS, DEFAULT_NETWORK


def _network_options(args) -> dict:
    keys = ("batch", "seq", "layers")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def _add_network_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("network", nargs="?", default=DEFAULT_NETWORK,
                   help=f"built-in name ({', '.join(sorted(BUILTINS))}) or package.module:function "
                        f"(default: {DEFAULT_NETWORK})")
    p.add_argument("--batch", type=int, help="global batch size (network option)")
    p.add_argument("--seq", type=int, help="sequence length (network option)")
    p.add_argument("--layers", type=int, help="number of layers (network option)")


def cmd_graph(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .graph.capture import capture_network

    graph = capture_network(args.network, **_network_options(args))
    console = Console()
    counts = Counter(op.type for op in graph.ops)
    table = Table(title=f"{graph.name}: {len(graph.ops)} operators")
    table.add_column("operator")
    table.add_column("count", justify="right")
    for op_type, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(op_type, str(n))
    console.print(table)
    params = graph.parameters()
    total = sum(p.nbytes or 0 for p in params)
    console.print(f"parameters: {len(params)} tensors, {sum(p.numel or 0 for p in params):,} "
                  f"elements, {total / 2**20:,.1f} MiB")
    functional = [op for op in graph.ops if not op.shardable]
    if functional:
        console.print(f"functional calls (cannot be sharded): {len(functional)}: "
                      + ", ".join(sorted({op.type for op in functional})))
    for w in graph.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="smsg-ms", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("graph", help="capture a network and summarise its operator graph")
    _add_network_args(p)
    p.set_defaults(func=cmd_graph)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line unless --debug
        if args.debug:
            raise
        print(f"smsg-ms: error: {exc}".splitlines()[0] if len(str(exc)) < 400
              else f"smsg-ms: error: {str(exc)[:400]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
