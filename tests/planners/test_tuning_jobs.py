from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faasml.exceptions import ConfigError
from faasml.planners.tuning import Stages, SuccessiveHalving, concatenate, hyperband

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_paper_scale_job_has_fourteen_halving_stages() -> None:
    sha = SuccessiveHalving(16384, reduction_factor=2, epochs_per_stage=2)
    assert sha.stages == 14
    assert sha.trial_counts == tuple(16384 // 2**i for i in range(14))
    assert sha.trial_counts[-1] == 2
    assert sha.epochs == (2,) * 14


def test_epochs_per_stage_may_differ_by_stage() -> None:
    sha = SuccessiveHalving(27, reduction_factor=3, stages=4, epochs_per_stage=(1, 2, 3, 4))
    assert sha.trial_counts == (27, 9, 3, 1)
    assert sha.epochs == (1, 2, 3, 4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trials": 0}, "the value of trials is 0, but must be trials >= 1"),
        ({"trials": 8, "reduction_factor": 1}, "reduction_factor is 1, but must be"),
        ({"trials": 8, "stages": 5}, "the value of stages is 5, but must be stages <= 4"),
        ({"trials": 8, "stages": 2, "epochs_per_stage": (1,)}, "has 1 entries"),
        ({"trials": 8, "epochs_per_stage": 0}, "epochs_per_stage[0] is 0"),
        ({"trials": 2.5}, "must be an integer"),
    ],
)
def test_bad_jobs_name_the_value_and_the_rule(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        SuccessiveHalving(**kwargs)  # type: ignore[arg-type]


@given(st.integers(1, 5000), st.integers(2, 6))
def test_every_stage_keeps_at_least_one_trial_and_shrinks_by_eta(trials: int, eta: int) -> None:
    sha = SuccessiveHalving(trials, eta)
    counts = sha.trial_counts
    assert counts[0] == trials
    assert all(q >= 1 for q in counts)
    assert all(b == a // eta for a, b in itertools.pairwise(counts))


def test_hyperband_brackets_match_li_et_al() -> None:
    brackets = hyperband(81, reduction_factor=3)
    assert [b.trials for b in brackets] == [81, 34, 15, 8, 5]
    assert brackets[0].trial_counts == (81, 27, 9, 3, 1)
    # Trials resume from checkpoints: 1, 3, 9, 27, 81 epochs in total -> 1, 2, 6, 18, 54 more.
    assert brackets[0].epochs == (1, 2, 6, 18, 54)
    assert brackets[-1].epochs == (81,)
    joined = concatenate(brackets)
    assert len(joined.trial_counts) == sum(b.stages for b in brackets)


def test_stages_need_matching_counts() -> None:
    with pytest.raises(ConfigError, match="one of each per stage"):
        Stages((4, 2), (1,))
    with pytest.raises(ConfigError, match="trials of stage 2 is 0"):
        Stages((4, 0), (1, 1))


def test_one_default_shape_for_the_job_file_the_planner_the_cli_and_the_api(
    tmp_path: Path,
) -> None:
    """16 trials at η = 2 with no stages or epochs given: the job file, the planner's record,
    `faasml plan tune` and `faasml simulate tune` (their job options) and the API all take
    the one rule of ``faasml.models.shape`` (⌊log_η q⌋ stages of 2 epochs)."""
    import faasml
    from faasml.cli.main import build_parser
    from faasml.cli.plan_tune import job_from
    from faasml.config import load_job

    text = (EXAMPLES / "tune-logreg.yaml").read_text()
    job = tmp_path / "job.yaml"
    job.write_text("\n".join(line for line in text.splitlines() if "epochs_per_stage" not in line))
    want = ((16, 8, 4, 2), (2, 2, 2, 2))
    parsed = load_job(job, environ={}).require_tuning()
    assert (parsed.trials_per_stage, (parsed.epochs_per_stage,) * parsed.stages) == want
    assert (parsed.shape.trial_counts, parsed.shape.epochs) == want
    sha = SuccessiveHalving(16)
    assert (sha.trial_counts, sha.epochs) == want
    for command in (["plan", "tune"], ["simulate", "tune"]):
        args = build_parser().parse_args([*command, "lr-higgs", "--trials", "16", "--budget", "1"])
        planned = job_from(args)
        assert (planned.trial_counts, planned.epochs) == want
    tuner = faasml.Tuner(
        job, tune_config=faasml.TuneConfig(budget=0.05, num_samples=16), run_dir=tmp_path / "r"
    )
    shape = tuner.job.require_tuning().shape
    assert (shape.trial_counts, shape.epochs) == want
    config = faasml.TuneConfig(budget=0.05, num_samples=16, stages=5)
    longest = faasml.Tuner(job, tune_config=config, run_dir=tmp_path / "r5").job.require_tuning()
    assert longest.trials_per_stage == (16, 8, 4, 2, 1)
