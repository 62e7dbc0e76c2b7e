"""A network built for the plan's device count, whose ``Morph`` output has its global
(``infer_shape``) shape: mindformers' MoE router pattern (issue #14, DeepSeek-V3 and
TeleChat3-MoE ``check 8``), in small.

Network: ``smsg_ms.networks.morph_permute:build``: ``x (16, 8, 32)`` → ReLU → Morph permute
(``fn``: each device's slice to ``(1, -1, 32)``; ``infer_shape``: ``(dp, 128/dp, 32)``) → Mul
by ``w (32,)`` → ``Reshape(·, (dp, -1))`` → Softmax, ``dp`` = the world size it is built for.

At 8 devices MindSpore's compile sees ``dp = 8`` and the Morph's output ``(8, 16, 32)`` cut 8
ways on dimension 0. Captured on one device as it was (``dp = 1``, the ``fn`` on the global
tensor: ``(1, 128, 32)``), the plan cannot cut dimension 0 and MindSpore inserts collectives the
plan does not predict (the router's AllGathers of DeepSeek-V3). Captured for 8 devices
(``capture_network(..., world=8)``, the ``fn``'s output reshaped to its ``infer_shape``), the
plan's collectives are MindSpore's: its dry-run compile is the oracle.
"""
from __future__ import annotations

SPEC = "smsg_ms.networks.morph_permute:build"


def _shapes(graph, op_type):
    return [[graph.tensors[n].shape for n in op.inputs[:1]] for op in graph.ops
            if op.type == op_type]


def test_the_capture_builds_for_the_plans_devices_and_keeps_the_morphs_global_shape():
    from smsg_ms.graph.capture import capture_network

    one = capture_network(SPEC)
    eight = capture_network(SPEC, world=8)
    assert one.built_for is None and _shapes(one, "Mul") == [[(1, 128, 32)]]
    assert eight.built_for == 8 and _shapes(eight, "Mul") == [[(8, 16, 32)]]
    assert _shapes(eight, "Softmax") == [[(8, 512)]]
    # a network that does not read the world size: the same graph, no device count recorded
    mlp = capture_network("mlp", world=8)
    assert mlp.built_for is None and mlp.fingerprint() == capture_network("mlp").fingerprint()


def test_a_plan_for_eight_devices_predicts_mindspores_collectives():
    from smsg_ms.graph.capture import capture_network
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_graph, plan_network

    plan = plan_network(SPEC, 8, progress=False)     # built for its devices: the default
    assert plan.built_for == 8 and '"built_for": 8' in plan.to_json()
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    assert report.ok, [(r.key, r.predicted, r.inserted) for r in report.ranks[0].rows]
    # captured for one device (plan_network(..., build_for_devices=False), plan
    # --no-build-for-devices): MindSpore's compile differs from the prediction
    before = plan_graph(capture_network(SPEC), 8, progress=False, network=SPEC, options={})
    assert before.built_for is None and "built_for" not in before.to_json()
    report = check_plan(before, [0])
    assert [r.error for r in report.ranks] == [None]
    assert not report.ok
