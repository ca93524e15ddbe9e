"""The loop's context in one process (no runtime): what a failing synchronisation raises,
and the rows of the global batch each function trains."""

from __future__ import annotations

import datetime
import io
import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from faasml.loop.context import LoopContext, LoopPlan, checkpoint_bytes  # noqa: E402
from faasml.loop.segment import call  # noqa: E402
from faasml.loop.sync import LoopError  # noqa: E402

from .loops import X, Y  # noqa: E402


def _loop(config: dict[str, Any], ctx: Any) -> None:
    model = torch.nn.Linear(4, 1)
    model, opt = ctx.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    train = ctx.shard((X, Y))
    for _ in ctx.epochs():
        for x, y in ctx.batches(train):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        ctx.report(val_rmse=1.0)


def _plan(n: int, worker: int) -> LoopPlan:
    return LoopPlan(n, worker, 16, 2, 0, 1, 1, 0)


def test_a_synchronisation_timeout_is_not_the_loops_error() -> None:
    def reduce(round_id: int, vector: Any) -> Any:
        raise TimeoutError(f"round {round_id}: worker 1 did not arrive")

    with pytest.raises(TimeoutError, match="worker 1 did not arrive"):  # restarted, not failed
        call(_loop, {}, LoopContext(_plan(2, 0), reduce))


def test_the_loops_own_error_carries_its_traceback() -> None:
    def broken(config: dict[str, Any], ctx: Any) -> None:
        raise KeyError("width")

    with pytest.raises(LoopError, match=r"the training loop raised KeyError: 'width'\nTraceback"):
        call(broken, {}, LoopContext(_plan(1, 0), None))


def test_the_functions_rows_make_up_each_global_batch() -> None:
    seen: dict[int, list[Any]] = {}
    for worker in range(3):
        ctx = LoopContext(_plan(3, worker), lambda r, v: v)
        ctx.prepare(torch.nn.Linear(4, 1), torch.optim.SGD([torch.zeros(1)], lr=0.1))
        shard = ctx.shard((torch.arange(96.0)[:, None], torch.arange(96)))
        for _ in ctx.epochs():
            batches = ctx.batches(shard)
            for x, _y in batches:
                seen.setdefault(worker, []).append(x[:, 0].long().tolist())
                ctx._state.sync.synced = True  # type: ignore[union-attr]  # as opt.step() does
            ctx.report(val_rmse=0.0)
    rounds = list(zip(*(seen[w] for w in range(3)), strict=True))
    assert len(rounds) == 96 // 16
    rows = [sorted(itertools.chain(*parts)) for parts in rounds]
    assert all(len(r) == 16 for r in rows)  # each round is a whole global batch of 16 rows
    assert sorted(itertools.chain(*rows)) == list(range(96))  # an epoch takes every row once
    assert all(len(p) >= 1 for parts in rounds for p in parts)  # every function, every round


def test_a_plain_checkpoint_is_not_loaded_back_to_be_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)
    model(X[:16]).sum().backward()
    opt.step()
    sched.step()
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}
    loads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    data = checkpoint_bytes(state)
    assert loads == []  # state_dict() values: their types say weights_only reads them
    back = real_load(io.BytesIO(data), weights_only=True)
    assert torch.equal(back["model"]["1.running_mean"], state["model"]["1.running_mean"])
    with pytest.raises(LoopError, match=r"torch.load\(weights_only=True\) refuses"):
        checkpoint_bytes({**state, "when": datetime.datetime(2020, 1, 1)})
    assert loads == [1]  # what is not plain is loaded back, and refused


class _SlowRows(torch.utils.data.Dataset):  # type: ignore[misc]
    """Rows that take ``delay_s`` each to read, as a loader that decodes or augments."""

    def __init__(self, rows: int, delay_s: float) -> None:
        self.rows, self.delay_s = rows, delay_s

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import time

        time.sleep(self.delay_s)
        return torch.zeros(4), torch.zeros(1)


def test_a_rounds_computation_includes_reading_its_batch() -> None:
    """The probe prices an epoch from its rounds' computation: reading the rows is part of it
    (the loop's step here does nothing, so the reading is all there is)."""
    rows, delay_s = 32, 0.003
    ctx = LoopContext(_plan(1, 0), None)
    shard = ctx.shard(_SlowRows(rows, delay_s))
    for _ in ctx.epochs():
        for _batch in ctx.batches(shard):
            pass
        ctx.report(val_rmse=1.0)
    figures = ctx.figures[0]
    assert figures.rounds == 2 and figures.rows == rows
    assert figures.compute_s >= rows * delay_s
