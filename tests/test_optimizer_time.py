"""The optimizer's update and the gradient accumulation priced as memory traffic
(``Links.update_seconds``, ``Links.accumulate_seconds``, charged by ``chunks_cost``), against a
hand derivation on one parameter of a million elements."""
import pytest

from smsg_ms.cost.pipeline import (MIXED_PRECISION_ADAM, LayerCost, Links, ParamSlice, stage_cost,
                                   super_step_seconds)

HBM = 1e12                      # bytes/s, round for the hand figures
PARAM = ParamSlice(elements=1_000_000, first_axis=1000, replicas=4)
LINKS = Links(bandwidth=1e9, latency=0.0, hbm_bandwidth=HBM)


def test_update_bytes_by_hand():
    # mixed-precision Adam: weight 2 B, gradient 2 B, fp32 master + m + v 12 B per element.
    # update: read + write weight (2 + 2) and state (12 + 12), read the gradient for the
    # clipping norm and for the update (2 + 2): 32 B per element, 1e6 elements -> 32e6 B;
    # at 1e12 B/s, 32 us. Optimizer-sharded over 4 replicas: a quarter, 8 us.
    assert LINKS.update_seconds(PARAM, MIXED_PRECISION_ADAM, False) == pytest.approx(32e-6)
    assert LINKS.update_seconds(PARAM, MIXED_PRECISION_ADAM, "level1") == pytest.approx(8e-6)


def test_accumulation_bytes_by_hand():
    # per micro-batch: read accumulator (2), read new gradient (2), write accumulator (2):
    # 6 B x 1e6 = 6e6 B -> 6 us; level 1 keeps the accumulator whole (6 us), level 2 shards
    # it over the 4 replicas (1.5 us).
    assert LINKS.accumulate_seconds(PARAM, MIXED_PRECISION_ADAM, False) == pytest.approx(6e-6)
    assert LINKS.accumulate_seconds(PARAM, MIXED_PRECISION_ADAM, "level1") == pytest.approx(6e-6)
    assert LINKS.accumulate_seconds(PARAM, MIXED_PRECISION_ADAM, "level2") == pytest.approx(1.5e-6)


def test_flat_links_without_memory_bandwidth_price_nothing():
    flat = Links(bandwidth=1e9)
    assert flat.update_seconds(PARAM, MIXED_PRECISION_ADAM, False) == 0.0
    assert flat.accumulate_seconds(PARAM, MIXED_PRECISION_ADAM, False) == 0.0


def test_step_by_hand():
    # one stage, one layer (forward 1 ms, backward 2 ms), 4 micro-batches, no sharding:
    # t = 3 ms + 6 us accumulation; g = AllReduce of 2e6 B over 4 replicas on 1e9 B/s,
    # 2·(3/4)·2e6 / 1e9 = 3 ms, + 32 us update; step = 4·t + g.
    layer = LayerCost(1e-3, 2e-3, 0.0, 0.0, 0.0, params=(PARAM,))
    cost = stage_cost([layer], 0, 1, 0, 1, recompute=[False], sharding=False, links=LINKS,
                      bytes_per=MIXED_PRECISION_ADAM, micro_batches=4)
    assert cost.micro_seconds == pytest.approx(3e-3 + 6e-6)
    assert cost.grad_sync_seconds == pytest.approx(3e-3 + 32e-6)
    assert super_step_seconds([cost], 4) == pytest.approx(4 * (3e-3 + 6e-6) + 3e-3 + 32e-6)
    # one micro-batch: nothing accumulated
    one = stage_cost([layer], 0, 1, 0, 1, recompute=[False], sharding=False, links=LINKS,
                     bytes_per=MIXED_PRECISION_ADAM, micro_batches=1)
    assert one.micro_seconds == pytest.approx(3e-3)


def test_fp32_main_grads_by_hand():
    # DeepSpeed's bf16 optimizer: gradients accumulated and AllReduced in fp32 (4 B), fp32
    # master + m + v (12 B), bf16 weight (2 B).
    # accumulation per micro-batch, as BF16_Optimizer.update_hp_grads does it
    # (hp_grad.add_(lp.grad.to(float32))): the cast reads the bf16 gradient (2) and writes an
    # fp32 copy (4); the add reads the accumulator (4) and the copy (4) and writes the
    # accumulator (4): 18 B x 1e6 -> 18 us.
    # update: 2·(2 + 12) + 2·4 = 36 B x 1e6 -> 36 us; optimizer-sharded over 4: 9 us.
    # sync on 1e9 B/s: AllReduce of 4e6 B over 4 replicas 2·(3/4)·4e6/1e9 = 6 ms; with ZeRO-1
    # also the AllGather of the bf16 weight (3/4)·2e6/1e9 = 1.5 ms.
    links = Links(bandwidth=1e9, latency=0.0, hbm_bandwidth=HBM, main_grad_bytes=4.0)
    assert links.accumulate_seconds(PARAM, MIXED_PRECISION_ADAM, False) == pytest.approx(18e-6)
    assert links.update_seconds(PARAM, MIXED_PRECISION_ADAM, False) == pytest.approx(36e-6)
    assert links.update_seconds(PARAM, MIXED_PRECISION_ADAM, "level1") == pytest.approx(9e-6)
    assert links.grad_sync_seconds(PARAM, 2.0, False) == pytest.approx(6e-3)
    assert links.grad_sync_seconds(PARAM, 2.0, "level1") == pytest.approx(7.5e-3)


def test_operator_update_by_hand():
    # the operator-level model's update (CostModel.breakdown "update"): an operator holding
    # 1e6 trained fp16 elements, gradient 2e6 B, Adam moments 8e6 B: read + write weight
    # (2e6 + 2e6) and moments (8e6 + 8e6), read the gradient twice (4e6): 24e6 B at 1e12 B/s.
    from smsg_ms.cost.kernels import update_seconds

    assert update_seconds({"gradient": 2e6, "optimizer": 8e6}, HBM) == pytest.approx(24e-6)
