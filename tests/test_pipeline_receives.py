"""A middle stage's Receives cost time: the per-micro-batch cost of a stage against a hand-built
1F1B timeline in which every Send meets its Receive.

The timeline is built here, independently of :mod:`smsg_ms.cost.pipeline`: each stage runs its
compute cells in the 1F1B order (Narayanan et al. 2021 §2.2: ``p − s − 1`` warm-up forwards,
then one forward and one backward alternately, then the cool-down backwards), and between two
cells the transfers MindSpore's scheduler chains there (``pipeline_scheduler.cc``): before
forward ``i`` on a stage ``s > 0`` the Receive of its input, after it on ``s < p − 1`` the Send
of its output; before backward ``i`` on ``s < p − 1`` the Receive of the gradient, after it on
``s > 0`` the Send of the input gradient. A transfer occupies both its stages for ``T`` seconds
from the moment both have reached it (blocking Send/Receive pairs); the transfers gathered
between the same two cells run one after another, in whichever order both ends are ready (the
forward one first when both are: MindSpore's order on an odd stage).
"""
from __future__ import annotations

import pytest

from smsg_ms.cost.pipeline import LayerCost, Links, stage_cost, super_step_seconds


def _program(s: int, p: int, m: int):
    """Stage ``s``'s list of steps: ``("cell", kind)`` or ``("xfer", {keys})`` where a key
    ``(kind, i, lo)`` names the transfer of micro-batch ``i`` between stages ``lo`` and
    ``lo + 1`` (``F``: activation forward, ``B``: gradient backward)."""
    cells = []
    warm = min(p - s - 1, m)
    f = b = 0
    for _ in range(warm):
        cells.append(("F", f))
        f += 1
    while f < m:
        cells.append(("F", f))
        f += 1
        cells.append(("B", b))
        b += 1
    while b < m:
        cells.append(("B", b))
        b += 1
    prog, pending = [], set()
    for kind, i in cells:
        if kind == "F" and s > 0:
            pending.add(("F", i, s - 1))          # Receive of the input activation
        if kind == "B" and s < p - 1:
            pending.add(("B", i, s))              # Receive of the output's gradient
        if pending:
            prog.append(("xfer", pending))
            pending = set()
        prog.append(("cell", kind))
        if kind == "F" and s < p - 1:
            pending.add(("F", i, s))              # Send of the output activation
        if kind == "B" and s > 0:
            pending.add(("B", i, s - 1))          # Send of the input gradient
    if pending:
        prog.append(("xfer", pending))
    return prog


def simulate_1f1b(p: int, m: int, fwd: float, bwd: float, transfer: float) -> float:
    """Seconds from the first forward to the last backward of ``m`` micro-batches on ``p``
    identical stages (``fwd``/``bwd`` per cell, ``transfer`` per Send/Receive pair)."""
    progs = [_program(s, p, m) for s in range(p)]
    pc = [0] * p                       # index of the step each stage is at
    left = [set(prog[0][1]) if prog and prog[0][0] == "xfer" else None for prog in progs]
    clock = [0.0] * p

    def advance(s):
        while pc[s] < len(progs[s]):
            step = progs[s][pc[s]]
            if step[0] == "cell":
                clock[s] += fwd if step[1] == "F" else bwd
                pc[s] += 1
                continue
            if left[s] is None:
                left[s] = set(step[1])
            if left[s]:
                return
            left[s] = None
            pc[s] += 1

    for s in range(p):
        left[s] = None
        advance(s)
    while any(pc[s] < len(progs[s]) for s in range(p)):
        # ties: the forward transfer first (an odd stage's chain: Receive of forward i + 1
        # before the Send of backward i's input gradient)
        ready = [(max(clock[k[2]], clock[k[2] + 1]), k[0] != "F", k) for s in range(p) if left[s]
                 for k in left[s] if left[k[2]] and left[k[2] + 1]
                 and k in left[k[2]] and k in left[k[2] + 1]]
        assert ready, "the hand-built schedule deadlocked"
        start, _, key = min(ready)
        for s in (key[2], key[2] + 1):
            clock[s] = start + transfer
            left[s].discard(key)
        for s in (key[2], key[2] + 1):
            advance(s)
    return max(clock)


F, B, T = 1.0, 2.0, 0.5


def test_hand_built_timeline_small():
    # one micro-batch through 3 stages: 3 forwards, 2 transfers, 3 backwards, 2 transfers
    assert simulate_1f1b(3, 1, F, B, T) == pytest.approx(3 * (F + B) + 4 * T)
    # 2 stages, 2 micro-batches, by hand: stage 0 F0 0-1, F0→ 1-1.5, F1 1.5-2.5; stage 1 F0
    # 1.5-2.5, B0 2.5-4.5; between stage 1's B0 and F1 its gradient Send of B0 and the Receive
    # of F1, stage 0 waiting there since 2.5: F1→ 4.5-5.0, B0← 5.0-5.5; stage 0 B0 5.5-7.5;
    # stage 1 F1 5.5-6.5, B1 6.5-8.5; B1← 8.5-9.0; stage 0 B1 9.0-11.0
    assert simulate_1f1b(2, 2, F, B, T) == pytest.approx(11.0)


@pytest.mark.parametrize("p", [3, 4])
def test_middle_stage_period_charges_its_receives(p):
    # steady state: one more micro-batch adds the slowest stage's per-micro-batch time, which
    # for a middle stage is f + b and four transfers (two Receives, two Sends)
    m = 12
    period = simulate_1f1b(p, m + 1, F, B, T) - simulate_1f1b(p, m, F, B, T)
    assert period == pytest.approx(F + B + 4 * T)
    layer = LayerCost(forward_seconds=F, backward_seconds=B, activation_bytes=0.0,
                      input_bytes=T, output_bytes=T)            # T bytes at 1 B/s: T seconds
    links = Links(bandwidth=1.0, latency=0.0)
    costs = [stage_cost([layer] * p, s, s + 1, s, p, recompute=[False], sharding=False,
                        links=links) for s in range(p)]
    assert costs[1].micro_seconds == pytest.approx(period)
    # the end stages take part in two transfers per micro-batch
    assert costs[0].micro_seconds == pytest.approx(F + B + 2 * T)
    assert costs[-1].micro_seconds == pytest.approx(F + B + 2 * T)
    # the super-step (m + p − 1)·max t_s is at least the timeline (it charges the middle
    # stage's period in the warm-up and cool-down slots too)
    assert super_step_seconds(costs, m) >= simulate_1f1b(p, m, F, B, T) - 1e-9


def test_partitioned_transfer_by_hand():
    """``Links.send_split = t``: each of the ``t`` tensor-parallel ranks sends ``1/t`` of the
    boundary tensor across the node boundary and the receivers AllGather it inside the node
    (Narayanan et al. SC'21 §4.1). By hand, latencies negligible (1 ps; a machine needs them
    positive): a Send is its bytes over the level it
    crosses, a ring AllGather of ``N`` bytes over ``t`` devices moves ``(t − 1)/t · N`` per
    device."""
    from dataclasses import replace

    from smsg_ms.cost.hardware import get_hardware

    base = get_hardware("dgx-a100")
    machine = replace(base, levels=tuple(replace(x, latency=1e-12) for x in base.levels))
    node_bw, cluster_bw = machine.levels[0].bandwidth, machine.levels[1].bandwidth
    links = Links(bandwidth=node_bw, machine=machine).for_stage(8)    # stages of one node each
    n = 8e6
    assert links.send_seconds(n) == pytest.approx(n / cluster_bw)          # whole, across
    split = replace(links, send_split=8)
    assert split.send_seconds(n) == pytest.approx(n / 8 / cluster_bw + 7 / 8 * n / node_bw)
    # one flat level: cutting gains nothing, N/t sent + (t − 1)/t·N gathered = N
    flat = Links(bandwidth=2.0, latency=0.0, send_split=4)     # no machine: no latency needed
    assert flat.send_seconds(8.0) == pytest.approx(8.0 / 2.0)
