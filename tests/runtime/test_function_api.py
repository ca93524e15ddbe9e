"""Any PyTorch training function: ``faasml.Tuner(train_fn, space, budget=...)`` runs through the
planner, coordinator, real worker processes, checkpoints and billing, with BatchNorm buffers
averaged over the workers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import faasml
from faasml.exceptions import ConfigError, FaasmlError
from faasml.job import apply_config, from_mapping
from faasml.runtime.coordinator import TrialFault
from faasml.runtime.function.checkpoint import (
    Checkpoint,
    checkpoint_from_bytes,
    checkpoint_to_bytes,
    load_checkpoint,
)
from faasml.runtime.function.worker import Fault, seed_step
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.runs.session import TuneRun
from faasml.sync.stores import open_store
from faasml.types import Allocation
from faasml.workloads import create_optimizer, global_batch
from faasml.workloads.build import build_model, load_data
from faasml.workloads.data import Dataset, images, partition, partition_bounds
from faasml.workloads.function_model import (
    FunctionModel,
    TrainFunctionError,
    as_dataset,
    combine,
    pack_function,
)

torch = pytest.importorskip("torch")

DATA = images(180, classes=3, size=8, channels=1, seed=1)
TRAIN = (DATA.features[:150], DATA.labels[:150])
TEST = (DATA.features[150:], DATA.labels[150:])
SPACE = {"lr": {"loguniform": [0.003, 0.05]}, "width": 4}
SETTINGS = {"batch_size": 16, "tuning.stages": 1, "tuning.epochs_per_stage": 1, "seed": 2}


def bn_cnn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
    """A small CNN with BatchNorm and dropout, trained with Adam."""
    width = config["width"]
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, width, 3, padding=1),
        torch.nn.BatchNorm2d(width),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(width, 3),
    )
    return faasml.TorchTrainable(
        model=net, train=TRAIN, test=TEST, optimizer="adam", lr=config["lr"]
    )


def _run_on_two_workers(folder: Path, faults: list[TrialFault] | None = None) -> dict[str, Any]:
    """Tune bn_cnn with its stage forced onto 2 workers; returns the record."""
    tuner = faasml.Tuner(
        bn_cnn,
        SPACE,
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2),
        settings=SETTINGS,
        run_dir=folder,
    )
    run = TuneRun(tuner.job, tuner.constraint, tuner.run_dir, faults=faults)
    run.plan()
    assert run.record.plan is not None
    run.record.plan.stages[0].allocation = Allocation(2, 1024, "embedded", "allreduce")
    return record_to_json(run.execute())


def _checkpoint(folder: Path, record: dict[str, Any], trial: int) -> Checkpoint:
    key = record["trials"][trial]["checkpoint"]
    with open_store(f"embedded://{folder / 'objects'}") as store:
        return load_checkpoint(store, key)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("clean")
    record = _run_on_two_workers(folder)
    return folder, record


def test_batchnorm_cnn_on_two_workers_checkpoints_the_mean_of_their_buffers(
    clean: tuple[Path, dict[str, Any]],
) -> None:
    folder, record = clean
    assert record["status"] == "finished"
    trial = record["trials"][0]
    assert trial["status"] == "done" and trial["history"][-1]["n"] == 2
    assert np.isfinite(trial["history"][-1]["val_loss"])
    saved = _checkpoint(folder, record, 0)
    assert saved.buffers.shape == (4 + 4 + 1,)  # running mean, running var, batches tracked

    # Replay the two workers here: each round, each worker's gradient and updated buffers,
    # then their mean. The checkpoint must hold the mean of the buffers, not one worker's.
    spec = apply_config(from_mapping(record["job"]), trial["config"])
    train, _ = load_data(spec.dataset)
    model = build_model(spec.model, train.input_shape, train.num_classes)
    assert isinstance(model, FunctionModel)
    torch.set_num_threads(1)
    name, hyper = model.own_optimizer()
    optimizer = create_optimizer(name, model.num_params, **hyper)
    params, buffers = model.init_params(spec.seed), model.init_buffers(spec.seed)
    # The batch size is the global batch: each round's rows are fixed by (seed, epoch, D, B),
    # each worker trains on those in its partition and weighs its mean by its share.
    parts = [partition(train, w, 2) for w in range(2)]
    lows = [partition_bounds(len(train), w, 2)[0] for w in range(2)]
    rows = [
        global_batch.part_rounds(
            len(train), spec.batch_size, seed=spec.seed, epoch=0, start=lo, stop=lo + len(p)
        )
        for lo, p in zip(lows, parts, strict=True)
    ]
    sizes = global_batch.round_sizes(len(train), spec.batch_size)
    rounds = global_batch.rounds_per_epoch(len(train), spec.batch_size)
    local: list[np.ndarray] = []
    for r in range(rounds):
        grads, local, weights = [], [], []
        for w, part in enumerate(parts):
            chosen = rows[w][r] - lows[w]
            model.load_buffers(buffers)
            seed_step(spec.seed, w, r)  # dropout draws from the step's seed
            _, grad = model.loss_and_grad(params, part.features[chosen], part.labels[chosen])
            weight = global_batch.share(len(chosen), 2, int(sizes[r]))
            weights.append(weight)
            grads.append(grad * np.float32(weight))
            local.append(model.buffers())
        assert sum(weights) == pytest.approx(2.0)
        weighted = [b * np.float32(wt) for b, wt in zip(local, weights, strict=True)]
        buffers = np.mean(np.stack(weighted), axis=0, dtype=np.float32)
        params = optimizer.step(params, np.mean(np.stack(grads), axis=0, dtype=np.float32))
    np.testing.assert_allclose(saved.buffers, buffers, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(saved.params, params, rtol=1e-4, atol=1e-5)
    assert saved.buffers[-1] == pytest.approx(rounds)  # every worker counted every round
    assert np.abs(local[0] - local[1]).max() > 1e-4  # the workers' own statistics differ
    assert not np.allclose(saved.buffers, local[0], atol=1e-6)


def test_a_rerun_from_the_checkpoint_is_identical(
    clean: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    folder, record = clean
    fault = TrialFault(trial=1, epoch=0, fault=Fault(worker_id=1, round_id=2, during="compute"))
    faulty = _run_on_two_workers(tmp_path, [fault])
    assert faulty["trials"][1]["restarts"] == 1
    for trial in (0, 1):
        expected, got = _checkpoint(folder, record, trial), _checkpoint(tmp_path, faulty, trial)
        np.testing.assert_array_equal(got.params, expected.params)
        np.testing.assert_array_equal(got.buffers, expected.buffers)


def test_a_closure_train_fn_tunes_through_fit_and_reports_metrics(tmp_path: Path) -> None:
    features = np.random.default_rng(0).normal(size=(240, 5)).astype(np.float32)
    labels = (features[:, 0] + features[:, 1] > 0).astype(np.int64)
    hidden_default = 6  # captured by the closure: the function is not importable anywhere

    def train_fn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
        net = torch.nn.Sequential(
            torch.nn.Linear(5, config.get("hidden", hidden_default)),
            torch.nn.Tanh(),
            torch.nn.Linear(config.get("hidden", hidden_default), 2),
        )

        def loss(outputs: Any, target: Any) -> Any:
            value = torch.nn.functional.cross_entropy(outputs, target)
            ctx.report(last_batch_loss=float(value))
            return value

        return faasml.TorchTrainable(
            model=net,
            train=lambda: Dataset.from_arrays(features, labels),  # taken once, by the Tuner
            loss=loss,
            optimizer="sgd",
            lr=config["lr"],
            momentum=0.9,
        )

    results = faasml.Tuner(
        train_fn,
        {"lr": {"loguniform": [0.05, 0.5]}, "hidden": {"choice": [4, 8]}},
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2),
        settings={"batch_size": 32, "tuning.stages": 1, "tuning.epochs_per_stage": 1},
        run_dir=tmp_path / "run",
    ).fit()
    assert results.record.status == "finished" and len(results) == 2
    best = results.get_best_result()
    assert set(best.config) == {"lr", "hidden"} and 0.05 <= best.config["lr"] <= 0.5
    assert best.metrics["val_accuracy"] > 0.6
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    for trial in record["trials"]:
        reported = trial["history"][-1]["reported"]
        assert 0 < reported["last_batch_loss"] < 5
    assert 0 < results.spent_usd <= 0.05
    assert (tmp_path / "run" / "report.md").exists()


def _module_only(config: dict[str, Any], ctx: Any) -> Any:
    return torch.nn.Linear(2, 2)


def _not_a_module(config: dict[str, Any], ctx: Any) -> Any:
    return faasml.TorchTrainable(model="net", train=TRAIN, lr=0.1)


def _bad_data(config: dict[str, Any], ctx: Any) -> Any:
    return faasml.TorchTrainable(model=torch.nn.Linear(2, 2), train="data.csv", lr=0.1)


def _bad_optimizer(config: dict[str, Any], ctx: Any) -> Any:
    return faasml.TorchTrainable(model=torch.nn.Linear(2, 2), train=TRAIN, optimizer="rmsprop")


def _torch_optimizer(config: dict[str, Any], ctx: Any) -> Any:
    return faasml.TorchTrainable(
        model=torch.nn.Linear(2, 2), train=TRAIN, optimizer=torch.optim.Adam, lr=0.1
    )


def _no_lr(config: dict[str, Any], ctx: Any) -> Any:
    return faasml.TorchTrainable(model=torch.nn.Linear(2, 2), train=TRAIN, optimizer="adam")


def _reports_while_building(config: dict[str, Any], ctx: Any) -> Any:
    ctx.report(width=1.0)
    return bn_cnn(config, ctx)


def _mismatched_test(config: dict[str, Any], ctx: Any) -> Any:
    return faasml.TorchTrainable(
        model=torch.nn.Linear(64, 3), train=TRAIN, test=(np.zeros((4, 3)), np.zeros(4)), lr=0.1
    )


@pytest.mark.parametrize(
    ("train_fn", "rule"),
    [
        (_module_only, r"train_fn returned Linear, but must return faasml.TorchTrainable"),
        (_not_a_module, r"model must be a torch.nn.Module"),
        (_bad_data, r"TorchTrainable.train is a str, but must be \(features, labels\) arrays"),
        (_bad_optimizer, r"unknown optimizer 'rmsprop'; choose one of: adam, sgd"),
        (_torch_optimizer, r"optimizer must be a name, 'sgd' or 'adam'"),
        (_no_lr, r"optimizer.lr is missing \(optimizer 'adam' needs it\)"),
        (_reports_while_building, r"not in train_fn's body"),
        (_mismatched_test, r"train has samples of shape \(1, 8, 8\), but test has \(3,\)"),
    ],
)
def test_bad_return_values_give_one_line_errors(train_fn: Any, rule: str, tmp_path: Path) -> None:
    with pytest.raises(TrainFunctionError, match=rule) as caught:
        faasml.Tuner(train_fn, SPACE, budget=0.05, run_dir=tmp_path)
    assert isinstance(caught.value, FaasmlError)
    assert "\n" not in str(caught.value)


def test_bad_spaces_and_settings_name_the_rule(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no distribution to tune"):
        faasml.Tuner(bn_cnn, {"lr": 0.01, "width": 4}, budget=0.05, run_dir=tmp_path)
    with pytest.raises(ConfigError, match="keys must be names"):
        faasml.Tuner(bn_cnn, {"optimizer.lr": {"uniform": [0.1, 0.2]}}, budget=1, run_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"settings cannot set model.width: train_fn builds"):
        faasml.Tuner(bn_cnn, SPACE, budget=1, settings={"model.width": 3}, run_dir=tmp_path)
    with pytest.raises(ConfigError, match="budget is given twice"):
        faasml.Tuner(bn_cnn, SPACE, budget=1, tune_config=faasml.TuneConfig(budget=2))
    with pytest.raises(TrainFunctionError, match="must be a function"):
        pack_function(3)  # type: ignore[arg-type]


def test_torch_datasets_and_loaders_become_arrays(tmp_path: Path) -> None:
    x, y = torch.from_numpy(TRAIN[0]), torch.from_numpy(TRAIN[1])
    tensors = as_dataset(torch.utils.data.TensorDataset(x, y), "train")

    class Pairs(torch.utils.data.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return 10

        def __getitem__(self, i: int) -> tuple[Any, int]:
            return x[i], int(y[i])

    with pytest.raises(TrainFunctionError, match="regression targets are not supported"):
        as_dataset((TRAIN[0], TRAIN[1] + 0.5), "train")
    pairs = as_dataset(Pairs(), "train", num_classes=3)
    np.testing.assert_array_equal(tensors.features, TRAIN[0])
    np.testing.assert_array_equal(pairs.labels, TRAIN[1][:10])
    assert pairs.num_classes == 3

    def loader_fn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
        trainable = bn_cnn(config, ctx)
        trainable.train = torch.utils.data.DataLoader(Pairs(), batch_size=5, shuffle=True)
        return trainable

    tuner = faasml.Tuner(loader_fn, SPACE, budget=0.05, run_dir=tmp_path)
    assert tuner.job.batch_size == 5  # the loader's batch size, as the per-worker batch
    train, test = load_data(tuner.job.dataset)
    assert len(train) == 10 and len(test) == 30


@pytest.mark.parametrize(("n_train", "n_test", "seed"), [(150, 30, 0), (7, 3, 5), (1, 1, 9)])
def test_combine_lays_out_a_test_set_that_split_gives_back(
    n_train: int, n_test: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    train = Dataset(rng.normal(size=(n_train, 3)), rng.integers(0, 2, n_train), 2)
    test = Dataset(rng.normal(size=(n_test, 3)), rng.integers(0, 3, n_test), 3)
    combined, fraction = combine(train, test, seed)
    back_train, back_test = combined.split(fraction, seed)
    np.testing.assert_array_equal(back_train.features, train.features)
    np.testing.assert_array_equal(back_test.labels, test.labels)
    assert combined.num_classes == 3


def test_checkpoints_keep_buffers_and_read_old_ones() -> None:
    saved = Checkpoint(np.ones(3, np.float32), b"", 1, 0, 4, buffers=np.arange(2, dtype=np.float32))
    back = checkpoint_from_bytes(checkpoint_to_bytes(saved))
    np.testing.assert_array_equal(back.buffers, [0, 1])
    header = json.dumps({"epoch": 1, "batch": 0, "round_id": 4, "meta": {}}).encode()
    buffer = io.BytesIO()  # a checkpoint written before buffers were kept
    np.savez(
        buffer,
        params=np.ones(3, np.float32),
        optimizer=np.zeros(0, np.uint8),
        header=np.frombuffer(header, np.uint8),
    )
    old = checkpoint_from_bytes(buffer.getvalue())
    assert old.buffers.shape == (0,) and old.round_id == 4


def test_faasml_resume_continues_a_function_run_without_the_script(tmp_path: Path) -> None:
    """The record holds the pickled function: a fresh process resumes the run from it."""
    tuner = faasml.Tuner(
        bn_cnn,
        SPACE,
        budget=0.05,
        tune_config=faasml.TuneConfig(num_samples=2),
        settings=SETTINGS,
        run_dir=tmp_path / "run",
    )
    TuneRun(tuner.job, tuner.constraint, tuner.run_dir).plan()  # planned, then "interrupted"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "faasml.cli.main", "resume", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["status"] == "finished"
    assert all(t["status"] == "done" and t["epochs_done"] == 1 for t in record["trials"])


def test_batch_size_is_faasmls_and_configs_come_back_by_name(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def train_fn(config: dict[str, Any], ctx: Any) -> faasml.TorchTrainable:
        seen.append(dict(config))
        return bn_cnn(config, ctx)

    space = {**SPACE, "batch_size": {"choice": [8, 16]}}
    tuner = faasml.Tuner(train_fn, space, budget=1, run_dir=tmp_path / "a")
    assert seen == [{"width": 4, "lr": seen[0]["lr"]}]  # no batch_size in config
    assert set(tuner.job.search_space.params) == {"model.config.lr", "batch_size"}  # type: ignore[union-attr]
    trial = apply_config(tuner.job, {"model.config.lr": 0.01, "batch_size": 8})
    assert trial.batch_size == 8 and trial.model.options["config"] == {"width": 4, "lr": 0.01}
    assert tuner.user_config({"model.config.lr": 0.01, "batch_size": 8}) == {
        "width": 4,
        "lr": 0.01,
        "batch_size": 8,
    }
    fixed = faasml.Tuner(bn_cnn, {**SPACE, "batch_size": 24}, budget=1, run_dir=tmp_path / "b")
    assert fixed.job.batch_size == 24


class _Crafted:
    """A pickle that runs code as it is loaded: it creates the file ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("signature", ["kept", "removed"])
def test_resume_refuses_a_function_the_user_did_not_pack(
    tmp_path: Path, signature: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record whose pickled function was replaced (keeping its signature, or dropping it)
    is refused in one line, and the pickle is never loaded."""
    import base64
    import hashlib
    import pickle

    from faasml.cli.main import main

    tuner = faasml.Tuner(
        bn_cnn, SPACE, budget=0.05, tune_config=faasml.TuneConfig(num_samples=2),
        settings=SETTINGS, run_dir=tmp_path / "run",
    )  # fmt: skip
    TuneRun(tuner.job, tuner.constraint, tuner.run_dir).plan()
    record_path = tmp_path / "run" / "record.json"
    record = json.loads(record_path.read_text())
    model = record["job"]["model"]
    assert model["signature"]  # the user's own is signed
    marker = tmp_path / "pwned"
    blob = pickle.dumps(_Crafted(marker))
    model["function"] = base64.b64encode(blob).decode("ascii")
    model["sha256"] = hashlib.sha256(blob).hexdigest()
    if signature == "removed":
        del model["signature"]
    record_path.write_text(json.dumps(record))

    assert main(["resume", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    reason = "it is not signed" if signature == "removed" else "not signed with this user's key"
    assert "refusing to load the pickled train_fn" in err and reason in err
    assert "run it again from your own code" in err
    assert not marker.exists()


def test_a_function_signed_under_another_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faasml.workloads.function_model import sign_packed, unpack_function

    def other(config: dict[str, Any], ctx: Any) -> Any:  # not cached: never unpacked here
        return config

    packed, digest = pack_function(other)
    signature = sign_packed(packed)
    from faasml.workloads import function_model

    monkeypatch.setattr(function_model, "_FUNCTIONS", {})  # as a fresh process has it
    assert unpack_function(packed, digest, signature)(1, None) == 1  # the user's own: loaded
    monkeypatch.setattr(function_model, "_FUNCTIONS", {})
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "elsewhere"))  # another user's
    with pytest.raises(TrainFunctionError, match="this user has no signing key"):
        unpack_function(packed, digest, signature)
    assert sign_packed(packed) != signature  # a new key of its own, made 0600
    key = tmp_path / "elsewhere" / "faasml" / "signing.key"
    assert key.stat().st_mode & 0o777 == 0o600
    with pytest.raises(TrainFunctionError, match="not signed with this user's key"):
        unpack_function(packed, digest, signature)
