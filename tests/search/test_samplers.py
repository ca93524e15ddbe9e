"""Samplers by name over a search space (``faasml.samplers``): real Optuna, pure objectives."""

from __future__ import annotations

import math
from typing import Any

import optuna
import pytest

from faasml.exceptions import ConfigError
from faasml.job import from_mapping
from faasml.samplers import SAMPLERS, ConfigSampler, grid_size
from faasml.searchspace import parse_search_space

SPACE = {
    "optimizer.lr": {"loguniform": [0.001, 1.0]},
    "batch_size": {"int": [32, 256]},
    "model.hidden": {"choice": [[32], [64, 64]]},
    "optimizer.momentum": {"uniform": [0.0, 0.95]},
}

CONDITIONAL = {
    "optimizer.name": {"choice": ["sgd", "adam"]},
    "optimizer.momentum": {"uniform": [0.0, 0.99], "when": {"optimizer.name": "sgd"}},
    "optimizer.lr": {"loguniform": [0.001, 1.0]},
}


def _in_space(config: dict[str, Any]) -> bool:
    return (
        0.001 <= config["optimizer.lr"] <= 1.0
        and 32 <= config["batch_size"] <= 256
        and isinstance(config["batch_size"], int)
        and config["model.hidden"] in ([32], [64, 64])
        and 0.0 <= config["optimizer.momentum"] <= 0.95
    )


def _told(sampler: ConfigSampler, count: int) -> list[dict[str, Any]]:
    """``count`` draws, each told a synthetic loss whose best lr is 0.01 (at 4 epochs)."""
    drawn = sampler.draw(count)
    for config in drawn:
        sampler.observe(config, 4, (math.log10(config["optimizer.lr"]) + 2.0) ** 2)
    return drawn


def test_random_draws_what_the_search_space_drew_before_samplers() -> None:
    space = parse_search_space(SPACE)
    pinned = [  # SearchSpace.sample(3, 7) before samplers existed: a seed draws the same trials
        {"batch_size": 155, "model.hidden": [32], "optimizer.lr": 0.002320570084348373},
        {"batch_size": 96, "model.hidden": [64, 64], "optimizer.lr": 0.3248832670561509},
        {"batch_size": 84, "model.hidden": [32], "optimizer.lr": 0.003797124505186482},
    ]
    drawn = ConfigSampler(space, "random", seed=7).draw(3)
    assert drawn == space.sample(3, 7)
    for config, expected in zip(drawn, pinned, strict=True):
        assert {k: config[k] for k in expected} == expected


@pytest.mark.parametrize("name", SAMPLERS)
def test_each_sampler_draws_valid_configurations_reproducibly(name: str) -> None:
    space = parse_search_space(SPACE)
    first, again = (ConfigSampler(space, name, seed=3) for _ in range(2))
    told = _told(first, 12)
    assert told == _told(again, 12)
    count = 1 if name == "gp" else 4  # GP's acquisition takes seconds per draw
    later = first.draw(count, start=12)
    assert later == again.draw(count, start=12)
    assert all(_in_space(c) for c in [*told, *later])
    other = ConfigSampler(space, name, seed=4)
    assert _told(other, 12) != told


def test_an_optuna_sampler_object_is_used_as_given() -> None:
    space = parse_search_space(SPACE)
    sampler = ConfigSampler(space, optuna.samplers.TPESampler(seed=0), seed=0)
    _told(sampler, 10)
    assert sampler.name == "TPESampler" and sampler.model_budget() == 4
    assert all(_in_space(c) for c in sampler.draw(5, start=10))


def test_tpe_concentrates_on_the_good_region_once_told() -> None:
    space = parse_search_space({"optimizer.lr": {"loguniform": [0.0001, 1.0]}})
    near = {}
    for name in ("random", "tpe"):
        sampler = ConfigSampler(space, name, seed=0)
        _told(sampler, 40)
        later = sampler.draw(20, start=40)
        near[name] = sum(abs(math.log10(c["optimizer.lr"]) + 2.0) < 0.5 for c in later)
    # Within half a decade of the best lr: a quarter of random's draws; most of TPE's.
    assert near["tpe"] >= 10 and near["tpe"] >= 2 * near["random"]


def test_model_based_samplers_draw_at_random_until_a_budget_has_enough_results() -> None:
    space = parse_search_space(SPACE)  # 4 parameters: BOHB's N_min + 2 = 4 + 3 results
    tpe, plain = ConfigSampler(space, "tpe", seed=5), ConfigSampler(space, "random", seed=5)
    assert tpe.min_points == 7
    for config in tpe.draw(6):
        tpe.observe(config, 1, 1.0)
        tpe.observe(config, 2, 1.0)
    tpe.observe(tpe.draw(1, start=6)[0], 2, 0.5)  # budget 2 has 7 results, budget 1 has 6
    assert tpe.model_budget() == 2
    assert tpe.draw(3, start=7) != plain.draw(3, start=7)
    assert ConfigSampler(space, "tpe", seed=5).draw(3, start=7) == plain.draw(3, start=7)


def test_grid_enumerates_every_combination_then_repeats() -> None:
    space = parse_search_space(
        {
            "a": {"choice": ["x", "y"]},
            "b": {"uniform": [0.0, 1.0]},
            "c": {"loguniform": [0.01, 1.0]},
            "d": {"int": [1, 2]},
        }
    )
    sampler = ConfigSampler(space, "grid", seed=0)
    grid = sampler.draw(36)
    assert len(grid) == grid_size(space) == 2 * 3 * 3 * 2
    assert len({repr(sorted(c.items())) for c in grid}) == 36
    assert {c["b"] for c in grid} == {0.0, 0.5, 1.0}
    assert {round(c["c"], 9) for c in grid} == {0.01, 0.1, 1.0}
    assert {c["d"] for c in grid} == {1, 2}
    assert sampler.draw(2, start=36) == grid[:2]  # more trials than combinations: repeated
    five = ConfigSampler(space, "grid", seed=0, options={"grid_points": 5})
    assert {c["b"] for c in five.draw(grid_size(space, 5))} == {0.0, 0.25, 0.5, 0.75, 1.0}


def test_conditional_parameters_are_present_only_where_their_condition_holds() -> None:
    space = parse_search_space(CONDITIONAL)
    for name in SAMPLERS:
        sampler = ConfigSampler(space, name, seed=1)
        drawn = sampler.draw(12)
        for config in drawn:
            sampler.observe(config, 1, config["optimizer.lr"])
        drawn += sampler.draw(2 if name == "gp" else 12, start=12)
        for config in drawn:
            assert ("optimizer.momentum" in config) == (config["optimizer.name"] == "sgd"), name
        assert {c["optimizer.name"] for c in drawn} == {"sgd", "adam"}, name
    assert len(ConfigSampler(space, "grid").grid()) == 3 * 3 + 3  # sgd × momentum, adam
    assert space.to_dict()["optimizer.momentum"]["when"] == {"optimizer.name": "sgd"}


def test_a_job_file_names_its_sampler_and_conditional_parameters() -> None:
    job = from_mapping(
        {
            "name": "conditional",
            "model": "logistic-regression",
            "dataset": {"synthetic": "higgs-like", "samples": 400},
            "optimizer": {"name": "sgd", "lr": 0.1},
            "search_space": CONDITIONAL,
            "tuning": {"trials": 8, "sampler": "grid", "sampler_options": {"grid_points": 2}},
        }
    )
    assert job.tuning is not None and job.tuning.sampler == "grid"
    configs = job.sample_configs()
    assert len(configs) == 8 and len({repr(sorted(c.items())) for c in configs}) == 4 + 2
    assert all(("optimizer.momentum" in c) == (c["optimizer.name"] == "sgd") for c in configs)
    again = from_mapping(job.to_dict())
    assert again.tuning == job.tuning and again.search_space == job.search_space


def test_a_conditional_parameter_is_checked_with_the_values_its_condition_needs() -> None:
    job = from_mapping(
        {
            "name": "adam-first",
            "model": "logistic-regression",
            "dataset": {"synthetic": "higgs-like", "samples": 400},
            "optimizer": {"name": "adam", "lr": 0.1},  # adam has no momentum: sgd's, when sgd
            "search_space": CONDITIONAL,
            "tuning": {"hyperband": 9, "sampler": "tpe"},
        }
    )
    assert job.tuning is not None and job.tuning.trials == 9 + 5 + 3
    assert job.tuning.trials_per_stage == (9, 3, 1, 5, 1, 3)
    assert from_mapping(job.to_dict()).tuning == job.tuning


@pytest.mark.parametrize(
    ("tuning", "message"),
    [
        ({"trials": 4, "sampler": "bayes"}, "tuning.sampler is 'bayes', but must be one of: "),
        ({"trials": 4, "sampler": "tpe", "sampler_options": {"grid_points": 2}}, "does not read"),
        ({"hyperband": 9, "trials": 4}, "leave out trials"),
    ],
)
def test_bad_sampler_settings_are_one_line(tuning: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping(
            {
                "name": "bad",
                "model": "logistic-regression",
                "dataset": {"synthetic": "higgs-like", "samples": 400},
                "optimizer": {"name": "sgd", "lr": 0.1},
                "search_space": {"optimizer.lr": {"loguniform": [0.01, 0.5]}},
                "tuning": tuning,
            }
        )
    assert message in str(caught.value) and "\n" not in str(caught.value)
    if tuning.get("sampler") == "bayes":
        assert str(caught.value).endswith("random, grid, tpe, gp")


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ({"optimizer.lr": 0.1}, "must name a choice parameter"),
        ({"optimizer.name": "rmsprop"}, "must be one of ['sgd', 'adam']"),
        ("sgd", "must be a mapping of a choice parameter"),
    ],
)
def test_bad_conditions_are_one_line(when: object, message: str) -> None:
    space = {**CONDITIONAL, "optimizer.momentum": {"uniform": [0.0, 0.9], "when": when}}
    with pytest.raises(ConfigError, match=None) as caught:
        parse_search_space(space)
    assert message in str(caught.value) and "search_space.optimizer.momentum.when" in str(
        caught.value
    )


def test_a_condition_may_not_loop() -> None:
    space = {
        "a": {"choice": [1, 2], "when": {"b": 1}},
        "b": {"choice": [1, 2], "when": {"a": 1}},
    }
    with pytest.raises(ConfigError, match="conditions may not loop"):
        parse_search_space(space)
