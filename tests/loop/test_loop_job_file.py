"""A job file whose ``model:`` names the user's own training loop: tuned and trained from the
file (real runs on ``local``), resumed by ``faasml resume``, and a function that is neither a
loop nor a model factory refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from faasml.exceptions import FaasmlError
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.loop_job import loop_job, read_job
from faasml.runtime.runs.session import TrainRun, TuneRun, resume_run
from faasml.types import Constraint

pytest.importorskip("torch")

HERE = Path(__file__).parent
DEADLINE = Constraint(deadline_s=3600)  # a budget caps each invocation at its predicted cost


@pytest.fixture(autouse=True)
def _loops_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def _job_file(folder: Path, model: Any, **fields: Any) -> Path:
    path = folder / "job.yaml"
    path.write_text(
        yaml.safe_dump({"name": "loop-job", "batch_size": 16, "seed": 2, "model": model, **fields})
    )
    return path


def test_a_loop_job_file_tunes_by_the_loops_metric(tmp_path: Path) -> None:
    space = {"model.lr": {"loguniform": [0.05, 0.1]}}
    tuning = {"trials": 2, "stages": 1, "epochs_per_stage": 2, "metric": "val_rmse", "mode": "min"}
    path = _job_file(
        tmp_path, {"name": "loops:mlp_loop", "width": 8}, search_space=space, tuning=tuning
    )
    job = loop_job(read_job(path), tmp_path / "run" / "function")
    run = TuneRun(job, DEADLINE, tmp_path / "run", measure=False)
    run.plan()
    record = record_to_json(run.execute())
    assert record["status"] == "finished" and record["job_source"] == str(path.resolve())
    lrs = set()
    for trial in record["trials"]:
        assert trial["status"] == "done" and trial["epochs_done"] == 2
        assert trial["history"][-1]["reported"]["val_rmse"] > 0
        lrs.add(trial["config"]["model.config.lr"])
    assert len(lrs) == 2 and all(0.05 <= lr <= 0.1 for lr in lrs)


def test_a_loop_job_file_trains_to_its_target_loss(tmp_path: Path) -> None:
    path = _job_file(
        tmp_path,
        {"name": "job_loops:loss_loop", "lr": 0.1},
        training={"target_loss": 0.5, "max_epochs": 30},
    )
    job = loop_job(read_job(path), tmp_path / "run" / "function")
    run = TrainRun(job, DEADLINE, tmp_path / "run", measure=False)
    run.plan()
    record = record_to_json(run.execute())
    assert record["status"] == "finished" and record["target"]["reached"] is True
    history = record["trials"][0]["history"]
    assert history[-1]["reported"]["loss"] <= 0.5 < history[0]["reported"]["loss"]
    assert len(history) < 30  # stopped at the target, not at max_epochs


def test_faasml_resume_continues_a_loop_job_files_train_run(tmp_path: Path) -> None:
    path = _job_file(
        tmp_path, {"name": "job_loops:loss_loop", "lr": 0.05}, training={"max_epochs": 3}
    )
    job = loop_job(read_job(path), tmp_path / "run" / "function")
    TrainRun(job, DEADLINE, tmp_path / "run", measure=False).plan()  # planned, "interrupted"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path[1:])}  # not this folder
    done = subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", "resume", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["status"] == "finished"
    assert [h["epoch"] for h in record["trials"][0]["history"]] == [1, 2, 3]
    # The packed loop is kept beside the record (rewritten after each segment), not in it.
    assert record["job"]["model"]["function"] == {"file": "function/train_fn.b64"}
    assert (tmp_path / "run" / "function" / "train_fn.b64").stat().st_size > 1000


def test_a_resume_refuses_a_packed_loop_changed_since_the_run_began(tmp_path: Path) -> None:
    path = _job_file(
        tmp_path, {"name": "job_loops:loss_loop", "lr": 0.05}, training={"max_epochs": 3}
    )
    job = loop_job(read_job(path), tmp_path / "run" / "function")
    TrainRun(job, DEADLINE, tmp_path / "run", measure=False).plan()  # planned, "interrupted"
    packed = tmp_path / "run" / "function" / "train_fn.b64"
    packed.write_text(packed.read_text()[:-8] + "AAAAAAA=")
    with pytest.raises(FaasmlError, match="does not match the digest its record holds"):
        resume_run(tmp_path / "run")


def test_a_function_neither_loop_nor_factory_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _job_file(tmp_path, "job_loops:pair")
    with pytest.raises(FaasmlError, match=r"returned int, but must return") as caught:
        loop_job(read_job(path), tmp_path / "run" / "function")
    assert "\n" not in str(caught.value)


def test_a_loop_job_file_with_a_dataset_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _job_file(
        tmp_path, "job_loops:loss_loop", dataset={"synthetic": "higgs-like", "samples": 100}
    )
    with pytest.raises(FaasmlError, match=r"training loop, which brings its own data") as caught:
        read_job(path)
    assert "\n" not in str(caught.value)


def test_faasml_tuner_runs_a_loop_job_file(tmp_path: Path) -> None:
    import faasml

    path = _job_file(
        tmp_path,
        {"name": "job_loops:loss_loop"},
        search_space={"lr": {"choice": [0.05, 0.1]}},
        tuning={"trials": 2, "stages": 1, "epochs_per_stage": 1},
    )
    tuner = faasml.Tuner(path, deadline=3600, run_dir=tmp_path / "run")
    run = TuneRun(tuner.job, tuner.constraint, tuner.run_dir, measure=False)
    run.plan()
    record = record_to_json(run.execute())
    assert record["status"] == "finished"
    assert sorted(t["config"]["model.config.lr"] for t in record["trials"]) == [0.05, 0.1]
    assert all(t["history"][-1]["reported"]["loss"] > 0 for t in record["trials"])


def test_faasml_trainer_trains_a_loop_to_its_target(tmp_path: Path) -> None:
    """``faasml train`` from Python: the loop and its config, measured, planned and trained."""
    from job_loops import loss_loop

    import faasml

    trainer = faasml.Trainer(
        loss_loop,
        {"lr": 0.1},
        deadline=3600,
        max_epochs=30,
        target_loss=0.5,
        settings={"batch_size": 16},
        run_dir=tmp_path / "run",
    )
    result = trainer.fit()
    assert result.status == "done" and result.config == {"lr": 0.1}
    assert result.history[-1]["reported"]["loss"] <= 0.5 < result.history[0]["reported"]["loss"]
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["kind"] == "train" and record["target"]["reached"] is True


def _faasml(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    return subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=folder,
    )


def test_faasml_train_runs_a_loop_job_file(tmp_path: Path) -> None:
    """The command: read, measured, planned and trained to its target."""
    path = _job_file(
        tmp_path,
        {"name": "job_loops:loss_loop", "lr": 0.1},
        training={"target_loss": 0.5, "max_epochs": 30},
    )
    done = _faasml(tmp_path, "train", str(path), "--deadline", "3600", "--run-dir", "run")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["status"] == "finished" and record["target"]["reached"] is True


def test_faasml_tune_refuses_a_function_neither_loop_nor_factory(tmp_path: Path) -> None:
    path = _job_file(
        tmp_path,
        "job_loops:pair",
        search_space={"lr": {"choice": [0.1, 0.2]}},
        tuning={"trials": 2},
    )
    done = _faasml(tmp_path, "tune", str(path), "--deadline", "3600", "--run-dir", "run")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "returned int" in lines[0]


def test_faasml_job_check_says_a_loop_is_a_training_loop(tmp_path: Path) -> None:
    # Read from its source: job check runs none of the job's code (the module would write
    # a file as it is imported).
    (tmp_path / "loud_loops.py").write_text(
        f"open({str(tmp_path / 'ran')!r}, 'w').close()\n\n"
        "def train_loop(config, ctx):\n    for _ in ctx.epochs():\n        ctx.report(loss=1.0)\n"
    )
    path = _job_file(tmp_path, {"name": "loud_loops:train_loop", "lr": 0.1})
    done = _faasml(tmp_path, "job", "check", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loud_loops:train_loop: your training loop train_loop(config, ctx)" in done.stdout
    shown = json.loads(_faasml(tmp_path, "job", "check", str(path), "--json").stdout)
    assert shown["model"]["kind"] == "loop" and "dataset" not in shown["job"]
    assert not (tmp_path / "ran").exists()


def test_faasml_job_check_says_a_factory_is_a_model_factory(tmp_path: Path) -> None:
    path = _job_file(
        tmp_path,
        {"name": "job_loops:linear", "width": 3},
        dataset={"synthetic": "higgs-like", "samples": 200},
        optimizer={"name": "sgd", "lr": 0.1},
    )
    done = _faasml(tmp_path, "job", "check", str(path), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["model"]["kind"] == "factory"


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("job_loops:pair", "is pair(config, ctx), which returns a value: a job file's"),
        ("job_loops:three", "is three(a, b, c): neither a training loop train_loop(config, "),
    ],
)
def test_faasml_job_check_refuses_a_callable_neither_loop_nor_factory_in_one_line(
    tmp_path: Path, model: str, said: str
) -> None:
    written = {
        "dataset": {"synthetic": "higgs-like", "samples": 200},
        "optimizer": {"name": "sgd", "lr": 0.1},
    }
    path = _job_file(tmp_path, model, **({} if model.endswith("pair") else written))
    done = _faasml(tmp_path, "job", "check", str(path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: the job's model {model!r}")
    assert said in lines[0]


def test_a_loops_functions_import_torch_dynamo_as_they_start(tmp_path: Path) -> None:
    """A loop's first ``torch.optim`` optimiser imports ``torch._dynamo`` (seconds): its
    functions import it as they start, in the cold start the probe measures, not in the
    first epoch of each function."""
    from faasml.runtime.profile.measure import platform_options_for

    path = _job_file(tmp_path, {"name": "loops:mlp_loop", "width": 8, "lr": 0.1})
    job = loop_job(read_job(path), tmp_path / "run" / "function")
    preload = platform_options_for(job, None, {})["preload"]
    assert preload[:2] == ("torch", "torch._dynamo")
