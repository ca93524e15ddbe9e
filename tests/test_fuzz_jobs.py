"""Fuzzing job files and run records: whatever a user writes, faasml gives a valid job (or an
opened run) or a one-line ``FaasmlError``, quickly; never another exception or a traceback."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faasml.exceptions import FaasmlError
from faasml.job import JobSpec, check_job, from_mapping, load_job, parse_assignments
from faasml.runtime.runs.session import BaseRun, TuneRun, resume_run
from faasml.testing.mutation import mutate
from faasml.types import Constraint

EXAMPLES = {p.name: p for p in (Path(__file__).parents[1] / "examples").glob("*.yaml")}
FAST_EXAMPLES = ["tune-logreg.yaml", "train-logreg.yaml"]  # numpy models: quick to build

ODD_VALUES = [
    None,
    True,
    0,
    -1,
    1,
    2,
    7,
    10**7,
    10**30,
    -(10**30),
    10**4000,
    0.5,
    -0.0,
    1e308,
    float("inf"),
    float("nan"),
    "",
    " ",
    "x",
    "local",
    "[/x]",
    "[bold]y",
    "redis://u:p@h:1/0",
    "../../etc/passwd",
    "é\u0000\u202e",
    "a" * 500,
    [],
    [1],
    [[[[[]]]]],
    {},
    {"uniform": [0, 1]},
    {"choice": [[1], {"a": None}]},
    {"loguniform": [-1, 1e300]},
]
values = st.recursive(
    st.sampled_from(ODD_VALUES) | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutate(data: Any, draw: st.DataObject, rounds: int) -> Any:
    """``rounds`` random edits: set, delete, rename, wrap (nest) or retype a value, or add one."""
    return mutate(data, draw, rounds, values, ("set", "delete", "rename", "wrap", "text", "add"))


def _encode(data: Any, draw: st.DataObject) -> bytes:
    """The job as YAML bytes, sometimes re-encoded, truncated or with bytes flipped."""
    try:
        text = yaml.safe_dump(data, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        text = repr(data)
    how = draw.draw(st.sampled_from(["utf-8", "utf-8", "utf-16", "utf-16-le", "latin-1", "cut"]))
    if how == "cut":
        raw = text.encode()
        return raw[: draw.draw(st.integers(0, len(raw)))]
    raw = text.encode(how, errors="replace")
    if draw.draw(st.booleans()):
        position = draw.draw(st.integers(0, max(0, len(raw) - 1)))
        raw = raw[:position] + bytes([draw.draw(st.integers(0, 255))]) + raw[position + 1 :]
    return raw


def _one_line_or_valid(call: Any) -> Any:
    started = time.monotonic()
    try:
        result = call()
    except FaasmlError as err:
        message = str(err)
        assert message and "\n" not in message, repr(message)
        result = None
    assert time.monotonic() - started < 60, "took too long (a hang detector, not a timing test)"
    return result


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    example=st.sampled_from(FAST_EXAMPLES),
    rounds=st.integers(1, 4),
    data=st.data(),
)
def test_mutated_job_files_load_or_fail_in_one_line(
    tmp_path: Path, example: str, rounds: int, data: st.DataObject
) -> None:
    original = yaml.safe_load(EXAMPLES[example].read_text())
    original["dataset"]["samples"] = 400
    mutated = _mutate(original, data, rounds)
    path = tmp_path / "job.yaml"
    path.write_bytes(_encode(mutated, data))
    job = _one_line_or_valid(lambda: load_job(path, environ={}))
    if job is not None:
        assert isinstance(job, JobSpec)
        check_job(job)  # the shared validation passes again on what it accepted
        again = from_mapping(job.to_dict(redact=False))
        assert again.to_dict() == job.to_dict()


@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(["seed", "batch_size", "model.l2", "tuning.trials", "platform", "x.y"]),
    text=st.text(max_size=30) | st.sampled_from(["[" * 3000, "1" * 5000, "&a [*a]", "{a: 1"]),
    through=st.sampled_from(["set", "environment"]),
)
def test_any_set_or_environment_value_loads_or_fails_in_one_line(
    field: str, text: str, through: str
) -> None:
    path = EXAMPLES["tune-logreg.yaml"]
    if through == "set":
        _one_line_or_valid(
            lambda: load_job(path, parse_assignments([f"{field}={text}"]), environ={})
        )
    else:
        variable = "FAASML_" + field.upper().replace(".", "__")
        _one_line_or_valid(lambda: load_job(path, environ={variable: text}))


def test_a_mutated_cnn_job_loads_or_fails_in_one_line(tmp_path: Path) -> None:
    """The torch example too, with seeded edits (building torch models is slower)."""
    original = yaml.safe_load(EXAMPLES["tune-cnn.yaml"].read_text())
    edits = [
        ("model", {"name": "mobilenet-small", "blocks": 10**30}),
        ("model", {"name": "resnet-small", "blocks": [10**6] * 3, "width": 1}),
        ("model", {"name": "mobilenet-small", "width": "[/x]"}),
        ("model", {"name": "transformer-small", "layers": 3}),
        ("dataset", {"synthetic": "images", "samples": 10**9}),
        ("dataset", {"synthetic": "images", "samples": 40, "size": [32]}),
        ("search_space", {"model.width": {"int": [1, 10**9]}}),
        ("batch_size", 10**7),
    ]
    for key, value in edits:
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump({**original, key: value}))
        assert _one_line_or_valid(lambda path=path: load_job(path, environ={})) is None, key


@pytest.fixture(scope="module")
def planned_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The record of a planned (never executed) small tuning run."""
    folder = tmp_path_factory.mktemp("planned")
    data = yaml.safe_load(EXAMPLES["tune-logreg.yaml"].read_text())
    data["dataset"]["samples"] = 400
    data["tuning"]["trials"] = 4
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    run = TuneRun(load_job(path, environ={}), Constraint(budget_usd=1.0), folder / "run")
    run.plan()
    record: dict[str, Any] = json.loads((folder / "run" / "record.json").read_text())
    record["status"] = "running"
    epoch = {"epoch": 1, "loss": 0.7, "t_s": 0.4, "spent_usd": 1e-6, "epoch_s": 0.3}
    epoch.update(n=1, memory_mb=1024)
    record["trials"][0].update(status="running", epochs_done=1, history=[epoch])
    record["charges"] = [{"t_s": 0.5, "kind": "function", "usd": 1e-6, "trial": 0}]
    return record


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rounds=st.integers(1, 4), from_file=st.booleans(), data=st.data())
def test_mutated_run_records_resume_or_fail_in_one_line(
    tmp_path: Path,
    planned_run: dict[str, Any],
    rounds: int,
    from_file: bool,
    data: st.DataObject,
) -> None:
    record = copy.deepcopy(planned_run)
    if not from_file:
        record["job_source"] = None  # the job comes from the record's own mapping
    mutated = _mutate(record, data, rounds)
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    text = json.dumps(mutated) if data.draw(st.booleans()) else repr(mutated)
    (folder / "record.json").write_text(text, encoding="utf-8", errors="replace")
    run = _one_line_or_valid(lambda: resume_run(folder))
    if run is not None:
        assert isinstance(run, BaseRun) and run.kind in ("tune", "train")


def _dump(data: Any) -> bytes:
    return yaml.safe_dump(data).encode()


def test_the_command_line_shows_no_traceback(tmp_path: Path) -> None:
    """Nasty files through ``faasml job check`` and ``faasml resume`` in a real process."""
    example = yaml.safe_load(EXAMPLES["tune-logreg.yaml"].read_text())
    files = {
        "binary.yaml": bytes(range(256)),
        "utf16.yaml": EXAMPLES["tune-logreg.yaml"].read_text().encode("utf-16-le"),
        "deep.yaml": b"a: " + b"[" * 20000 + b"]" * 20000,
        "markup.yaml": _dump({**example, "model": "[/x]"}),
        "huge.yaml": yaml.safe_dump(
            {**example, "dataset": {"synthetic": "higgs-like", "samples": 10**30}}
        ).encode(),
        "blocks.yaml": yaml.safe_dump(
            {**example, "model": {"name": "mlp", "hidden": [10**30]}}
        ).encode(),
    }
    commands = []
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        commands.append(["job", "check", str(tmp_path / name)])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "record.json").write_text("{}")
    commands.append(["resume", str(tmp_path / "run")])
    driver = (
        "import json, sys\n"
        "from faasml.cli.main import main\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    print('exit', main(argv), flush=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", driver, json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert result.stdout.split() == ["exit", "2"] * len(commands)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == len(commands), result.stderr
    single = subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", "job", "check", str(tmp_path / "binary.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert single.returncode == 2 and "Traceback" not in single.stderr
    assert single.stderr.startswith("error:") and single.stderr.count("\n") == 1
