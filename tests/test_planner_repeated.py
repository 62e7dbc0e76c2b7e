"""The search's repeated-block hint from build_problem's signatures equals the one from the
graph's structural block hashes (group_blocks, the oracle)."""
import pytest

from smsg_ms.cost.model import CostModel
from smsg_ms.planner import build_problem
from smsg_ms.planner.variables import repeated_variable_groups


@pytest.mark.parametrize("spec,options", [("llama", {"layers": 3}), ("bert", {})])
def test_groups_from_signatures_match_block_hashes(captured, spec, options):
    graph = captured(spec, **options)
    problem, variables = build_problem(graph, CostModel(graph, 8))
    want = repeated_variable_groups(graph, problem)
    assert want is not None and len(want[0]) >= 2
    assert repeated_variable_groups(graph, problem, variables) == want
