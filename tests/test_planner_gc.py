"""plan_graph pauses the cyclic garbage collector while planning and restores it as it was."""
import gc

import pytest

from smsg_ms.planner import plan_graph
from smsg_ms.search import NoFeasiblePlan


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_state_restored(captured, enabled):
    graph = captured("mlp")
    seen = []
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        plan_graph(graph, 8)
        seen.append(gc.isenabled())
        with pytest.raises(NoFeasiblePlan):   # raised inside the planning: restored too
            plan_graph(graph, 8, memory_gib=1e-9)
        seen.append(gc.isenabled())
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [enabled, enabled]


def test_collector_paused_during_planning(captured, monkeypatch):
    """The cost model runs with the collector off (observed from inside the planning)."""
    from smsg_ms.cost import model as cost_model

    graph = captured("mlp")
    states = []
    original = cost_model.CostModel.options

    def spy(self, op):
        states.append(gc.isenabled())
        return original(self, op)

    monkeypatch.setattr(cost_model.CostModel, "options", spy)
    assert gc.isenabled()
    plan_graph(graph, 8)
    assert states and not any(states)
    assert gc.isenabled()
