"""`faasml tune --json` prints the run's record alone on stdout; `--set` changes the job of
`tune` and `train` as on `job check`; piped, a run prints a line per trial result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from faasml.cli.main import main

from .tiny_jobs import four_trial_tune_job

RUN = "import sys; from faasml.cli.main import main; sys.exit(main(sys.argv[1:]))"


def _trial_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("trial ")]


def test_tune_json_prints_the_record_alone_and_set_changes_the_job(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(four_trial_tune_job("json-set", epochs_per_stage=1)))
    run_dir = tmp_path / "run"
    argv = ["tune", str(job), "--budget", "0.05", "--run-dir", str(run_dir), "--json"]
    argv += ["--set", "tuning.trials=2", "--set", "tuning.stages=1"]
    done = subprocess.run(
        [sys.executable, "-c", RUN, *argv], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = json.loads(done.stdout)  # nothing else on stdout
    assert printed == json.loads((run_dir / "record.json").read_text())
    assert printed["status"] == "finished"
    assert printed["job"]["tuning"]["trials"] == 2 and len(printed["trials"]) == 2  # was 4
    # The progress went to stderr (piped): a line per trial result, none over 80 columns.
    # The lines come as the trials report, in whichever order they finish.
    lines = sorted(_trial_lines(done.stderr), key=lambda line: int(line.split()[1]))
    assert len(lines) == sum(len(t["history"]) for t in printed["trials"]) == 2
    trials = sorted(printed["trials"], key=lambda t: int(t["trial_id"]))
    for line, trial in zip(lines, trials, strict=True):
        value = trial["history"][0]["val_loss"]
        assert line.startswith(f"trial {trial['trial_id']}  epoch 1  val_loss {value:.4g}  $")
        assert len(line) <= 80
    assert "Report:" in done.stderr


def test_train_takes_set_and_prints_a_line_per_epoch_when_piped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(four_trial_tune_job("train-set", epochs_per_stage=1)))
    run_dir = tmp_path / "run"
    argv = ["train", str(job), "--deadline", "10m", "--run-dir", str(run_dir)]
    assert main([*argv, "--set", "training.max_epochs=zero"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "training.max_epochs" in err and "zero" in err
    main([*argv, "--set", "training.max_epochs=2", "--set", "training.target_loss=0.01"])
    record = json.loads((run_dir / "record.json").read_text())
    assert record["job"]["training"]["max_epochs"] == 2
    history = record["trials"][0]["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    lines = _trial_lines(capsys.readouterr().out)  # stdout is not a terminal here
    assert [line.split("  ")[:2] for line in lines] == [
        ["trial 0", "epoch 1"],
        ["trial 0", "epoch 2"],
    ]
    assert all(len(line) <= 80 for line in lines)
