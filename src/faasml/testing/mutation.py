"""Random edits of nested JSON-like data for fuzz tests (job files, run records): every input a
user or a damaged file could hand faasml must load or be refused in one line.

Needs Hypothesis (a dev dependency); only tests import this module.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

ACTIONS = ("set", "delete", "rename", "wrap", "text", "add", "negate")
"""set a value, delete it, rename its key, nest it, make it text, add a key beside it, negate a
number."""


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside nested mappings and lists (the root's is ``()``)."""
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += paths(child, (*prefix, index))
    return found


def mutate(
    data: Any,
    draw: st.DataObject,
    rounds: int,
    values: st.SearchStrategy[Any],
    actions: Sequence[str] = ACTIONS,
) -> Any:
    """A copy of ``data`` with ``rounds`` random ``actions`` anywhere in it; new values are
    drawn from ``values``."""
    data = copy.deepcopy(data)
    for _ in range(rounds):
        where = [p for p in paths(data) if p]
        if not where:
            return data
        path = draw.draw(st.sampled_from(where))
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        _edit(parent, path[-1], draw.draw(st.sampled_from(list(actions))), draw, values)
    return data


def _edit(parent: Any, last: Any, action: str, draw: st.DataObject, values: Any) -> None:
    value = parent[last]
    if action == "set":
        parent[last] = copy.deepcopy(draw.draw(values))  # never edit a shared constant
    elif action == "delete":
        del parent[last]
    elif action == "rename" and isinstance(parent, dict):
        parent[draw.draw(st.sampled_from([f"{last}_", str(last).upper(), 1, None]))] = parent.pop(
            last
        )
    elif action == "wrap":
        parent[last] = draw.draw(st.sampled_from([[value], {"x": value}]))
    elif action == "text":
        parent[last] = str(value)
    elif action == "add" and isinstance(value, dict):
        value[draw.draw(st.text(max_size=8))] = copy.deepcopy(draw.draw(values))
    elif action == "negate" and isinstance(value, int | float) and not isinstance(value, bool):
        parent[last] = -value - 1
