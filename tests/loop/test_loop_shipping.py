"""A training function travels by reference (``faasml.loop.shipping``): its pickle is put once
in the run's object store and every request names it, so a loop whose closure holds its data
runs with small requests; a blob altered in the store is refused before it is unpickled."""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

import faasml
from faasml.loop.shipping import by_reference, function_key, shipped_function
from faasml.runtime.function.task import sent_recipe
from faasml.runtime.profile.calls import job_recipes
from faasml.sync.stores import open_store
from faasml.workloads.build import load_data
from faasml.workloads.function_model import FunctionContext, TrainFunctionError, sign_packed

torch = pytest.importorskip("torch")
cloudpickle = pytest.importorskip("cloudpickle")

from .loops import SETTINGS, SPACE, X, Y  # noqa: E402

HELD = 2_000_000
"""Floats the loop's closure holds (8 MB: more than a FaaS request may carry)."""


def holding(weights: Any) -> Any:
    """A loop whose closure holds ``weights`` (its first ones scale the inputs)."""

    def loop(config: dict[str, Any], ctx: Any) -> None:
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
        model, opt = ctx.prepare(model, opt)
        if ctx.checkpoint:
            model.load_state_dict(ctx.checkpoint["model"])
        train = ctx.shard((X * weights[:4].abs().mean(), Y))
        for _ in ctx.epochs():
            for x, y in ctx.batches(train):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            ctx.report({"val_rmse": 1.0}, {"model": model.state_dict()})

    return loop


def test_a_loop_holding_megabytes_runs_with_its_pickle_in_the_store_not_in_requests(
    tmp_path: Path,
) -> None:
    tuner = faasml.Tuner(
        holding(torch.ones(HELD)),
        SPACE,
        deadline=3600,
        tune_config=faasml.TuneConfig(num_samples=1, metric="val_rmse", mode="min"),
        settings={**SETTINGS, "tuning.epochs_per_stage": 2},
        run_dir=tmp_path / "run",
    )
    recipe = job_recipes(tuner.job, [{}], load_data(tuner.job.dataset)[0])[0]
    with open_store(f"embedded://{tmp_path / 'sent'}") as store:
        sent = sent_recipe(recipe, store, set())
    assert len(pickle.dumps(recipe)) > 4 * HELD  # the pickle holds the closure's tensor
    assert len(pickle.dumps(sent)) < 100_000 and "function" not in sent.model_options

    tuner.fit()  # its probe and its trial's invocations get the function by reference
    record = json.loads((tuner.run_dir / "record.json").read_text())
    assert record["status"] == "finished"
    assert [t["status"] for t in record["trials"]] == ["done"]
    sha256 = str(tuner.job.model.options["sha256"])
    with open_store(f"embedded://{tuner.run_dir / 'objects'}") as store:
        blob = store.get(function_key(sha256))
    assert blob is not None and hashlib.sha256(blob).hexdigest() == sha256


def _stranger(tmp_path: Path) -> tuple[dict[str, Any], Any]:
    """Model options naming a function this process never unpacked (its pickle differs from
    any other test's), sent by reference into a store under ``tmp_path``; and the store."""
    tag = str(tmp_path)
    blob = cloudpickle.dumps(lambda config, ctx, tag=tag: ("stranger", config))
    packed = base64.b64encode(blob).decode("ascii")
    options = {"function": packed, "sha256": hashlib.sha256(blob).hexdigest()}
    options["signature"] = sign_packed(packed)
    store = open_store(f"embedded://{tmp_path / 'objects'}")
    return by_reference(options, store, set()), store


class _Touch:
    """Unpickling it creates a file: proof that something was unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (Path.touch, (self.path,))


def test_a_function_fetched_once_is_kept_while_the_process_lives(tmp_path: Path) -> None:
    options, store = _stranger(tmp_path)
    assert "function" not in options
    function = shipped_function(options)
    assert function({"a": 1}, FunctionContext({})) == ("stranger", {"a": 1})
    store.delete("function/")  # a warm instance does not fetch it again
    assert shipped_function(options) is function


def test_an_altered_blob_in_the_store_is_refused_unread(tmp_path: Path) -> None:
    options, store = _stranger(tmp_path)
    marker = tmp_path / "unpickled"
    store.put(str(options["function_key"]), pickle.dumps(_Touch(marker)))
    with pytest.raises(TrainFunctionError, match="does not match its sha256"):
        shipped_function(options)
    assert not marker.exists()


def test_a_blob_without_the_users_signature_is_refused_unread(tmp_path: Path) -> None:
    options, _ = _stranger(tmp_path)
    with pytest.raises(TrainFunctionError, match="refusing to load"):
        shipped_function({**options, "signature": "0" * 64})


def test_a_reference_to_a_missing_blob_names_the_key(tmp_path: Path) -> None:
    options, store = _stranger(tmp_path)
    store.delete("function/")
    with pytest.raises(TrainFunctionError, match=r"function/.*is not in the object store"):
        shipped_function(options)
