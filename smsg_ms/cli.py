"""``smsg-ms`` command line: ``graph``, ``plan`` (the main job) and friends.

Every command turns a known failure into one line on stderr and a non-zero exit; ``--debug``
shows the traceback.
"""
from __future__ import annotations

import argparse
import sys

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
    from .graph.capture import capture_network
    from .graph.summary import print_summary

    print_summary(capture_network(args.network, **_network_options(args)))
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
