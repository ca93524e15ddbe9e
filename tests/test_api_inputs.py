"""The Python API refuses bad arguments in one FaasmlError naming the value and the rule, before
any work: a space that is not a mapping, a wrong type, a misspelt distribution, a choice too
long to check. Fuzzed: whatever a caller passes, ``Tuner`` and ``TuneConfig`` build or raise a
FaasmlError, never another exception."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faasml
from faasml.exceptions import ConfigError, FaasmlError
from faasml.searchspace import MAX_CHOICES, Choice, parse_search_space

JOB = Path(__file__).resolve().parents[1] / "examples" / "tune-logreg.yaml"


def train_fn(config: dict[str, Any], ctx: Any) -> None:
    """Never called by these tests' refused arguments (each is refused before)."""
    raise AssertionError("train_fn was called")


def test_a_space_that_is_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"param_space is \[\('lr', 1\)\] \(list\), but must"):
        faasml.Tuner(train_fn, [("lr", 1)], budget=0.05, run_dir=tmp_path / "run")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budget": "0.05"}, "budget is '0.05' (str), but must be a number"),
        ({"deadline": [60]}, "deadline is [60] (list), but must be a number"),
        ({"tune_config": {"budget": 1}}, "tune_config is {'budget': 1}, but must be a faasml"),
        ({"settings": "seed=1", "budget": 1}, "settings is 'seed=1' (str), but must be a"),
        ({"run_dir": 5, "budget": 1}, "run_dir is 5, but must be a path"),
    ],
)
def test_wrong_types_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        faasml.Tuner(train_fn, {"lr": {"uniform": [0.1, 0.2]}}, **kwargs)


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("budget", True, "a number"),
        ("num_samples", 8.0, "a whole number"),
        ("reduction_factor", "2", "a whole number"),
        ("metric", 1, "a string"),
    ],
)
def test_tune_config_checks_its_fields(field: str, value: object, rule: str) -> None:
    with pytest.raises(ConfigError, match=f"the value of {field} is .*, but must be {rule}"):
        faasml.TuneConfig(**{field: value})  # type: ignore[arg-type]


def test_a_misspelt_distribution_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    space = {"w": {"chioce": [4, 8]}, "lr": {"loguniform": [0.01, 0.1]}}
    with pytest.raises(ConfigError) as caught:
        faasml.Tuner(train_fn, space, budget=0.05, run_dir=tmp_path / "run")
    text = str(caught.value)
    assert "param_space.w is {'chioce': [4, 8]}, whose key 'chioce' is not a distribution" in text
    assert "uniform, loguniform, int, choice" in text


def test_a_constant_mapping_still_passes_as_a_choice_of_one() -> None:
    space = parse_search_space({"model.config.w": {"choice": [{"hidden": 4}]}})
    assert space.params["model.config.w"] == Choice(({"hidden": 4},))


def test_a_choice_longer_than_the_bound_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="lists 200,000 values, but a choice may list at most"):
        faasml.Tuner(
            train_fn, {"w": {"choice": list(range(200_000))}}, budget=0.05, run_dir=tmp_path
        )
    with pytest.raises(ConfigError, match=f"at most {MAX_CHOICES:,}"):
        faasml.Tuner(
            JOB,
            {"optimizer.lr": {"choice": [0.1] * (MAX_CHOICES + 1)}},
            budget=0.05,
            run_dir=tmp_path / "run",
        )


def test_a_choice_at_the_bound_builds(tmp_path: Path) -> None:
    values = [round(0.001 * (i + 1), 6) for i in range(MAX_CHOICES)]
    tuner = faasml.Tuner(
        JOB, {"optimizer.lr": {"choice": values}}, budget=0.05, run_dir=tmp_path / "run"
    )
    assert tuner.job.search_space is not None
    assert len(tuner.job.search_space.params["optimizer.lr"].extremes()) == MAX_CHOICES


ODD: list[object] = [None, True, 0, -1, 1, 8, 10**30, 0.05, -0.0, float("inf"), float("nan")]
ODD += ["", "x", "0.05", [], [1], {}, {"a": 1}, b"x", object()]
odd: st.SearchStrategy[object] = (
    st.sampled_from(ODD) | st.integers() | st.floats() | st.text(max_size=6)
)
SPACES: list[object] = [
    {"optimizer.lr": {"uniform": [0.01, 0.1]}},
    {"lr": {"loguniform": [0.01, 0.1]}, "w": 4},
    {"w": {"int": [1, 2]}},
    None,
    {},
    {"optimizer.lr": {"chioce": [0.1]}},
    {"optimizer.lr": {"choice": []}},
    [("lr", 1)],
    "lr",
]
odd_spaces = st.dictionaries(
    st.text(max_size=8), odd | st.dictionaries(st.text(max_size=8), odd), max_size=2
)
spaces: st.SearchStrategy[object] = st.tuples(
    st.integers(0, 3), st.sampled_from(SPACES), odd_spaces
).map(lambda drawn: drawn[2] if drawn[0] == 3 else drawn[1])
FIELDS: tuple[str, ...] = ("budget", "deadline", "num_samples", "reduction_factor")
FIELDS += ("epochs_per_stage", "metric", "mode", "minimise")
configs = st.dictionaries(st.sampled_from(FIELDS), odd | st.sampled_from([2, 4, "min", "time"]))
runs = itertools.count()


def sometimes_odd(*usual: object) -> st.SearchStrategy[object]:
    """One of ``usual`` most of the time, else an odd value."""
    return st.tuples(st.integers(0, 3), st.sampled_from(usual), odd).map(
        lambda drawn: drawn[2] if drawn[0] == 3 else drawn[1]
    )


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    job=sometimes_odd("file", "path", "function"),
    space=spaces,
    config=configs,
    budget=sometimes_odd(0.05, 1, None),
    deadline=sometimes_odd(None, 600),
    run_dir=sometimes_odd("fresh"),
)
def test_tuner_builds_or_raises_a_faasml_error(
    tmp_path_factory: pytest.TempPathFactory,
    job: object,
    space: object,
    config: dict[str, Any],
    budget: object,
    deadline: object,
    run_dir: object,
) -> None:
    named = {"file": str(JOB), "path": JOB, "function": train_fn}
    target = named[job] if isinstance(job, str) and job in named else job
    base = tmp_path_factory.getbasetemp()
    folder = base / f"fuzz-{next(runs)}" if run_dir == "fresh" else run_dir
    if isinstance(folder, str):
        folder = base / "odd" / folder.replace("\x00", "")  # never outside the test's folder
    try:
        tune_config = faasml.TuneConfig(**config)
    except FaasmlError:
        tune_config = None
    try:
        faasml.Tuner(
            target,  # type: ignore[arg-type]
            space,  # type: ignore[arg-type]
            tune_config=tune_config,
            budget=budget,  # type: ignore[arg-type]
            deadline=deadline,  # type: ignore[arg-type]
            run_dir=folder,  # type: ignore[arg-type]
        )
    except FaasmlError:
        pass
    except AssertionError as err:  # train_fn called: the arguments were all good
        assert "train_fn was called" in str(err)
