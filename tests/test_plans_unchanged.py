"""Plans are byte-identical to those of the code before the planner redesign (issue #15).

The files under ``tests/data/plans_before_redesign/`` were written by the planner as it was
before its modules were split into :mod:`smsg_ms.planner` (commit 80ee96c), through the same
calls as ``smsg-ms plan`` (single stage: ``plan_graph`` of the captured network, as
``plan_network``; pipelined: ``plan_network_pipelined`` then ``set_write_back(plan, "auto")``,
as the CLI). A refactoring that changes any byte of a plan fails here. To extend the set, add a
case and write its file with the code before a change: ``python tests/test_plans_unchanged.py``.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data" / "plans_before_redesign"

_LLAMA = {"layers": 2, "hidden": 256, "heads": 4, "ffn": 512, "vocab": 1000, "seq": 128,
          "batch": 8}
_BERT = {"layers": 2, "hidden": 256, "heads": 4, "ffn": 512, "vocab": 1000, "seq": 64,
         "batch": 8}
_LLAMA12 = {"layers": 12, "hidden": 128, "heads": 4, "ffn": 256, "vocab": 512, "seq": 64}

#: name → (network, network options, devices, planning settings); ``pipeline`` in the settings
#: makes a pipelined plan whose ``global_batch`` is the options' ``batch``
CASES = {
    "mlp-8dev": ("mlp", {}, 8, {}),
    "mlp-64dev": ("mlp", {}, 64, {}),
    "llama-8dev": ("llama", _LLAMA, 8, {}),
    "llama-64dev": ("llama", _LLAMA, 64, {}),
    # the memory limit binds (the unconstrained plan needs 29 MiB per device)
    "llama-64dev-h100-mem0.025": ("llama", _LLAMA, 64, {"hardware": "h100", "memory_gib": 0.025}),
    "bert-8dev": ("bert", _BERT, 8, {}),
    "bert-64dev": ("bert", _BERT, 64, {}),
    # its file's options.batch edited 4 -> 8 and its hash resealed, nothing else: a pipelined
    # plan's options record the global batch, not the micro-batch (issue #14 item 4)
    "llama12-16dev-p2-mb2": ("llama", dict(_LLAMA12, batch=8), 16,
                             {"pipeline": 2, "micro_batches": 2}),
    "llama12-64dev-pauto": ("llama", dict(_LLAMA12, batch=16), 64, {"pipeline": "auto"}),
    # tight memory: recompute of every block and optimizer sharding are chosen
    "llama12-16dev-pauto-mem0.012": ("llama", dict(_LLAMA12, batch=16), 16,
                                     {"pipeline": "auto", "memory_gib": 0.012}),
}


@functools.lru_cache(maxsize=None)
def _capture(spec: str, items: tuple):
    from smsg_ms.graph.capture import capture_network

    return capture_network(spec, **dict(items))


def plan_text(name: str, capture=_capture) -> str:
    """The plan file text of case ``name``; ``capture(spec, items)`` gives a captured graph."""
    spec, options, devices, settings = CASES[name]
    settings = dict(settings)
    if "pipeline" not in settings:
        from smsg_ms.planner import plan_graph

        plan = plan_graph(capture(spec, tuple(sorted(options.items()))), devices,
                          options=dict(options), network=spec, **settings)
    else:
        from smsg_ms.planner import plan_network_pipelined
        from smsg_ms.planner.write_back import set_write_back

        rest = dict(options)
        batch = rest.pop("batch")

        def by_batch(b: int):
            return capture(spec, tuple(sorted(dict(rest, batch=b).items())))

        plan = plan_network_pipelined(spec, devices, global_batch=batch,
                                      stages=settings.pop("pipeline"), capture=by_batch,
                                      **settings, **rest)
        set_write_back(plan, "auto")
    if not plan.content_hash:
        plan.seal()
    return plan.to_json()


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_is_byte_identical_to_before_the_redesign(name, captured):
    expected = (DATA / f"{name}.plan.json").read_text()

    def capture(spec, items):
        return captured(spec, **dict(items))

    assert plan_text(name, capture) == expected, f"{name}: the plan changed"


if __name__ == "__main__":      # write the reference files (only with the code they pin)
    DATA.mkdir(parents=True, exist_ok=True)
    for case in sorted(CASES):
        (DATA / f"{case}.plan.json").write_text(plan_text(case))
        print("wrote", case)
