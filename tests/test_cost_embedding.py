"""The ``Embedding`` family (indices first, table second: mindformers' ``parallel_core``
models) against MindSpore's parallel compiler (dry-run, 8 devices).

Collectives: the accepted strategies compiled once as a bank, compared per case and phase
(``test_cost_vs_mindspore.assert_bank_matches``). Rejections: ``CostModel.check`` raises exactly
when MindSpore's ``EmbeddingInfo`` refuses the strategy (one compile per case).
"""
from __future__ import annotations

import pytest

from test_cost_families import (DEVICES, SPEC, assert_cases_match, capture_bank, capture_cache,
                                case_op, refused_by_both)

from smsg_ms.cost.model import CostModel

INDICES = ["index", [8, 4], 32]  # (batch 8, sequence 4) token ids in [0, 32)
TABLE = ["param", [32, 8]]
ARGS = [None, None, 2.0, False]  # padding_idx, max_norm, norm_type, scale_grad_by_freq


def case(name, strategy):
    return (name, "Embedding", {}, [INDICES, TABLE], strategy, ARGS)


ACCEPTED = [case("rows cut by the device count", [[1, 1], [8, 1]]),
            case("rows 4, columns 2", [[1, 1], [4, 2]]),
            case("rows 2, columns 4", [[1, 1], [2, 4]]),
            case("columns cut by the device count", [[1, 1], [1, 8]])]
REJECTED = [case("indices cut", [[8, 1], [1, 1]]),
            case("indices and rows cut", [[2, 1], [4, 1]]),
            case("indices and columns cut", [[4, 1], [1, 2]]),
            case("rows 2 with repeated calculation", [[1, 1], [2, 1]])]


@pytest.fixture(scope="module")
def accepted_bank():
    return capture_bank(ACCEPTED)


def test_collectives_equal_mindspore(accepted_bank):
    assert_cases_match(ACCEPTED, accepted_bank, set())


def test_row_cut_reduce_scatter_derivation(accepted_bank):
    """Independent derivation: rows cut 4 (columns 2) leaves on each device partial lookups of
    all 8·4 tokens over its 8/2 = 4 columns, summed over the 4 row holders and scattered onto the
    batch: one forward ReduceScatter in a group of 4 of the (8, 4, 4) fp32 tensor = 512 bytes;
    columns only: nothing."""
    model = CostModel(accepted_bank, DEVICES)
    cost = model.check(case_op(accepted_bank, 1), ((1, 1), (4, 2)))
    forward = [(c.kind, c.group, c.full_bytes) for c in cost.collectives if c.phase == "forward"]
    assert forward == [("ReduceScatter", 4, 8 * 4 * 4 * 4)]
    cost = model.check(case_op(accepted_bank, 3), ((1, 1), (1, 8)))
    assert [c for c in cost.collectives if c.phase == "forward"] == []


def test_one_dimensional_indices_need_rows_cut():
    """MindSpore fails on 1-D indices with the table's rows uncut (seen in the dry-run:
    "tensor_map_origin_ size must be equal to tensor_shape_origin_ size"); the model refuses."""
    from smsg_ms.cost.operators import embedding
    from smsg_ms.graph.model import OpNode

    op = OpNode(id=0, type="Embedding", inputs=[], outputs=[], attrs={})
    spec = embedding.describe(op, [(16,), (32, 8)], [(16, 8)])
    assert "rows cut" in spec.rule({"v": 1, spec.inputs[1][1]: 8}, 8)
    assert spec.rule({"v": 8}, 8) is None


@pytest.fixture(scope="module")
def one_case_graph():
    """The rejected cases' one-case networks, each captured once (they share shapes)."""
    return capture_cache(SPEC)


@pytest.mark.parametrize("i", range(len(REJECTED)), ids=[c[0] for c in REJECTED])
def test_check_raises_iff_mindspore_rejects(one_case_graph, i):
    assert "Embedding" in refused_by_both(one_case_graph(REJECTED[i:i + 1]), REJECTED[i],
                                          "Embedding")
