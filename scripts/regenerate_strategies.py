"""Regenerate (or ``--check``) the reference plan files under ``strategies/``.

One plan per reference network and device count, written by the same code path as
``smsg-ms plan`` (``smsg_ms.planner.plan_network`` + ``save_plan``), named
``strategies/<network>-<N>dev.plan.json``. Plans are deterministic, so ``--check`` (used by
``tests/test_integration_strategies.py``) fails when a committed file differs from what the
planner produces now: regenerate and review the diff when the cost model or search changes.

    python scripts/regenerate_strategies.py            # write every file
    python scripts/regenerate_strategies.py --check    # compare, exit 1 on any difference
    python scripts/regenerate_strategies.py --only mlp # one network
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "strategies"
DEVICES = (8, 64)
#: (file stem, network spec, options, Python package it needs or None)
REFERENCE = (
    ("mlp", "mlp", {}, None),
    ("llama", "llama", {}, None),
    ("bert", "bert", {}, None),
    # mindformers LlamaForCausalLM, 2 layers at LLaMA-2-7B width (hidden 4096, 32 heads, FFN 11008)
    ("mf-llama-7b-2l", "mf-llama", {"layers": 2, "batch": 8, "seq": 2048}, "mindformers"),
    ("vit-b16", "vit-b16", {"batch": 64}, "mindcv"),
)


def plan_path(stem: str, devices: int) -> Path:
    return OUT / f"{stem}-{devices}dev.plan.json"


def missing_package(package: str | None) -> bool:
    return package is not None and importlib.util.find_spec(package) is None


def plan_text(spec: str, options: dict, devices: int) -> str:
    """The plan file text ``smsg-ms plan SPEC --devices N`` would write."""
    from smsg_ms import planner

    plan = planner.plan_network(spec, devices, **options)
    if not plan.content_hash:
        plan.seal()
    return plan.to_json()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--only", help="file stem to regenerate (default all)")
    args = parser.parse_args(argv)
    from smsg_ms.integration.plan_io import write_text_atomic

    OUT.mkdir(exist_ok=True)
    differ = []
    for stem, spec, options, package in REFERENCE:
        if args.only and stem != args.only:
            continue
        if missing_package(package):
            print(f"skip {stem}: package {package} is not installed "
                  "(scripts/install_model_packages.sh)")
            continue
        for devices in DEVICES:
            path = plan_path(stem, devices)
            text = plan_text(spec, options, devices)
            if args.check:
                same = path.exists() and path.read_text() == text
                print(f"{'same' if same else 'DIFFERS'} {path.relative_to(ROOT)}")
                if not same:
                    differ.append(path)
            else:
                write_text_atomic(path, text)
                print(f"wrote {path.relative_to(ROOT)}")
    if differ:
        print(f"{len(differ)} plan file(s) differ from the planner's output: run "
              "python scripts/regenerate_strategies.py and review the diff", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
