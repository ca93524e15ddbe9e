"""What each trial's configuration costs to train, relative to the search space's mean.

The job probe times every model configuration it builds (the search space's ``model.*`` and
``batch_size`` extremes, ``job_profile.model_configs``), and the profile's computation per
sample is their mean. Trials differ: a ``model.width`` of 16 trains slower than one of 8, a
transformer of two layers about twice as slow as one of one. A tuning run knows its trials'
configurations before it plans, so it prices them, not the mean: where the trials drawn are
mostly of one kind, the mean would price them far off.

``factor`` interpolates a configuration's cost between the measured ones, multilinearly
over each numeric key's two extremes (a choice of several numbers, a range), and matches
other values exactly; ``mean_factor`` is the mean over a set of trials. Pure: no I/O.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

ConfigCosts = tuple[tuple[str, float], ...]
"""(the configuration as canonical JSON, its cost per sample over the measured mean)."""


def config_text(config: Mapping[str, Any]) -> str:
    """A configuration's canonical JSON (keys sorted), as profiles store it."""
    return json.dumps(dict(config), sort_keys=True, default=repr)


def relative_costs(configs: Sequence[Mapping[str, Any]], seconds: Sequence[float]) -> ConfigCosts:
    """Each configuration's seconds per sample over their mean (all of them 1.0 where the
    mean is not positive)."""
    if len(configs) != len(seconds):
        raise ValueError(f"{len(configs)} configurations but {len(seconds)} timings")
    if not configs:
        return ()
    mean = sum(seconds) / len(seconds)
    return tuple(
        (config_text(c), s / mean if mean > 0 else 1.0)
        for c, s in zip(configs, seconds, strict=True)
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def factor(config: Mapping[str, Any], costs: ConfigCosts) -> float:
    """The cost of ``config`` relative to the measured mean: the measured configurations'
    factors weighted multilinearly by where each of its numeric values lies between the
    measured extremes of that key (clipped to them); a non-numeric value must match one
    measured. 1.0 (the mean) where nothing measured applies."""
    measured = [(json.loads(text), value) for text, value in costs]
    if not measured:
        return 1.0
    keys = sorted({k for c, _ in measured for k in c})
    if not keys:
        return 1.0
    weights: dict[str, dict[str, float]] = {}
    for key in keys:
        seen = {json.dumps(c.get(key), sort_keys=True): c.get(key) for c, _ in measured}
        wanted = config.get(key)
        numbers = {t: _number(v) for t, v in seen.items()}
        x = _number(wanted)
        if x is not None and len(seen) > 1 and all(n is not None for n in numbers.values()):
            ordered = sorted(seen, key=lambda t: numbers[t] or 0.0)
            low, high = ordered[0], ordered[-1]
            lo, hi = numbers[low] or 0.0, numbers[high] or 0.0
            t = 0.0 if hi <= lo else min(1.0, max(0.0, (x - lo) / (hi - lo)))
            weights[key] = {low: 1.0 - t, high: t}
        else:
            text = json.dumps(wanted, sort_keys=True)
            if text not in seen and len(seen) > 1:
                return 1.0
            weights[key] = {text if text in seen else next(iter(seen)): 1.0}
    table = {
        tuple(json.dumps(c.get(k), sort_keys=True) for k in keys): value for c, value in measured
    }
    total = weighted = 0.0
    for corner in itertools.product(*(weights[k].items() for k in keys)):
        weight = math.prod(w for _, w in corner)
        value = table.get(tuple(text for text, _ in corner))
        if weight > 0 and value is not None:  # a corner the probe did not build: left out
            total += weight
            weighted += weight * value
    return weighted / total if total > 0 else 1.0


def mean_factor(configs: Sequence[Mapping[str, Any]], costs: ConfigCosts) -> float:
    """The mean ``factor`` of ``configs`` (1.0 for none)."""
    if not configs:
        return 1.0
    return sum(factor(c, costs) for c in configs) / len(configs)
