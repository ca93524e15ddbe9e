from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from faasml.catalog import load_catalog
from faasml.models import allocation_space
from faasml.planners import pareto_front, pareto_indices
from faasml.workload import load_workload

values = arrays(
    np.float64,
    st.integers(min_value=0, max_value=60),
    elements=st.floats(min_value=0, max_value=100, allow_nan=False).map(lambda x: round(x, 1)),
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_front_is_exactly_the_non_dominated_set(data: st.DataObject) -> None:
    time = data.draw(values)
    cost = data.draw(arrays(np.float64, time.shape, elements=st.floats(0, 100).map(round)))
    front = set(pareto_indices(time, cost).tolist())
    for i in range(time.size):
        dominated = np.any(
            (time <= time[i]) & (cost <= cost[i]) & ((time < time[i]) | (cost < cost[i]))
        )
        if dominated:
            assert i not in front
        else:
            # Not dominated: it or an exact twin (same time and cost) is on the front.
            twins = {j for j in range(time.size) if time[j] == time[i] and cost[j] == cost[i]}
            assert len(front & twins) == 1


def test_front_is_sorted_fastest_first_and_cost_falls() -> None:
    table = allocation_space(load_workload("mobilenet-cifar10"), load_catalog("aws-lambda"))
    front = pareto_front(table)
    assert 1 < len(front) < len(table) / 100
    assert np.all(np.diff(front.time_s) >= 0)
    assert np.all(np.diff(front.cost_usd) < 0)
    assert front.time_s[0] == table.time_s.min()
    assert front.cost_usd[-1] == table.cost_usd.min()


def test_empty_input() -> None:
    assert pareto_indices(np.array([]), np.array([])).size == 0
