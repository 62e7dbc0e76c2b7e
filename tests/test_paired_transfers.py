"""Links.paired_transfers: Megatron-LM's 1F1B batches the Send and the Receive at a stage border
into one ``batch_isend_irecv`` pair (``megatron/training.py`` at commit 8aa4619), so a border
costs one transfer per micro-batch instead of two. Expected values derived by hand from the
flat-link Send time ``S / B + latency``."""
from __future__ import annotations

from dataclasses import replace

import pytest

from smsg_ms.cost.pipeline import LayerCost, Links, border_seconds, stage_cost

B, LAT = 1e9, 1e-5          # bytes/s, s
S = 4e6                     # boundary activation bytes per device, one micro-batch
SEND = S / B + LAT          # one transfer: 4 ms + 10 us


def _chain(n=4):
    # forward 1 ms, backward 2 ms per layer; every border tensor S bytes
    return [LayerCost(1e-3, 2e-3, activation_bytes=0.0, input_bytes=S, output_bytes=S)
            for _ in range(n)]


@pytest.mark.parametrize("start, stop, unpaired, paired", [
    (0, 1, 2 * SEND, SEND),          # first stage: Send act + Receive grad -> one pair
    (1, 3, 4 * SEND, 2 * SEND),      # middle stage: two borders, two pairs
    (3, 4, 2 * SEND, SEND),          # last stage: Receive act + Send grad -> one pair
    (0, 4, 0.0, 0.0),                # no border, nothing to send
])
def test_border_seconds_by_hand(start, stop, unpaired, paired):
    links = Links(bandwidth=B, latency=LAT)
    layers = _chain()
    assert border_seconds(layers, start, stop, links) == pytest.approx(unpaired)
    assert border_seconds(layers, start, stop,
                          replace(links, paired_transfers=True)) == pytest.approx(paired)


def test_paired_stage_time_by_hand():
    # middle stage of 2 layers out of 4, 1F1B, no recompute, no parameters:
    # compute 2 * (1 + 2) ms = 6 ms; transfers 4 * SEND unpaired, 2 * SEND paired
    layers = _chain()
    links = Links(bandwidth=B, latency=LAT)
    kwargs = dict(recompute=[False, False], sharding=False, micro_batches=8)
    plain = stage_cost(layers, 1, 3, 1, 3, links=links, **kwargs)
    paired = stage_cost(layers, 1, 3, 1, 3, links=replace(links, paired_transfers=True), **kwargs)
    assert plain.micro_seconds == pytest.approx(6e-3 + 4 * SEND)
    assert paired.micro_seconds == pytest.approx(6e-3 + 2 * SEND)
    assert paired.grad_sync_seconds == plain.grad_sync_seconds == 0.0


def test_default_is_unpaired():
    # MindSpore chains every transfer: the default prices them as before
    assert Links(bandwidth=B).paired_transfers is False
