from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.cluster import AppModel, Job, Layout, TopologyCommModel, efficiency
from faasml.cluster.records import packed_layout

positive = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(sqr=positive, var=positive, m0=st.integers(1, 1024), scale=st.floats(1.0, 1e4))
def test_efficiency_is_in_unit_interval_and_one_at_the_initial_batch(
    sqr: float, var: float, m0: int, scale: float
) -> None:
    e = float(efficiency(sqr, var, m0 * scale, m0))
    assert 0.0 < e <= 1.0 + 1e-12
    assert float(efficiency(sqr, var, m0, m0)) == 1.0


@given(sqr=positive, var=positive, m0=st.integers(1, 1024))
def test_larger_batches_have_diminishing_returns(sqr: float, var: float, m0: int) -> None:
    batch = m0 * np.geomspace(1, 1e3, 20)
    eff = efficiency(sqr, var, batch, m0)
    progress_per_step = eff * batch / m0  # Pollux's gain
    assert np.all(np.diff(eff) <= 1e-12)  # efficiency never rises with the batch
    assert np.all(np.diff(progress_per_step) >= -1e-9)  # yet a bigger batch never loses progress
    assert np.all(progress_per_step <= batch / m0 + 1e-9)  # and gains at most linearly


@settings(max_examples=50)
@given(
    coef=st.lists(st.floats(0.0, 1.0), min_size=5, max_size=5),
    slowdown=st.floats(1.0, 4.0),
    nodes=st.integers(1, 64),
    per=st.integers(1, 8),
)
def test_topology_comm_model_grows_with_servers_and_switches(
    coef: list[float], slowdown: float, nodes: int, per: int
) -> None:
    model = TopologyCommModel(*coef, switch_slowdown=slowdown)
    one = Layout((per,) * nodes, 1)
    more = Layout((per,) * (nodes + 1), 1)
    spread = Layout((per,) * nodes, 3)
    assert model.sync_time(more) >= model.sync_time(one) - 1e-12 or nodes == 1
    assert model.sync_time(spread) >= model.sync_time(one) - 1e-12
    assert model.sync_time(one) >= 0


def test_measured_placements_are_reproduced(models: dict[str, AppModel]) -> None:
    for model in models.values():
        trace = model.trace
        for i in range(0, len(trace.placements), 37):
            counts = tuple(sorted((int(c) for c in trace.placements[i]), reverse=True))
            step, sync = model.step_sync(Layout(counts, 1), np.array([trace.local_bsz[i]]))
            rows = [
                j
                for j, p in enumerate(trace.placements)
                if tuple(sorted((int(c) for c in p), reverse=True)) == counts
                and trace.local_bsz[j] == trace.local_bsz[i]
            ]
            assert step[0] == np.mean(trace.step_time[rows])
            assert sync[0] == np.mean(trace.sync_time[rows])


def test_throughput_never_falls_with_more_servers_beyond_the_measured_range(
    models: dict[str, AppModel],
) -> None:
    for model in models.values():
        bsz = np.array([float(model.trace.min_local_bsz)])
        rates = []
        for nodes in range(5, 40):  # beyond the measured 4-node placements
            layout = Layout((4,) * nodes, 1)
            step, _ = model.step_sync(layout, bsz)
            rates.append(layout.gpus * bsz[0] / step[0])
        assert np.all(np.diff(rates) >= -1e-9), model.name


def test_spanning_switches_slows_synchronisation(models: dict[str, AppModel]) -> None:
    model = models["imagenet"]
    bsz = np.array([64.0])
    near, _ = model.step_sync(Layout((4,) * 8, 1), bsz)
    far, _ = model.step_sync(Layout((4,) * 8, 2), bsz)
    assert far[0] > near[0]


def test_adaptive_batch_is_at_least_as_good_as_the_fixed_one(
    models: dict[str, AppModel],
) -> None:
    rng = np.random.default_rng(7)
    for model in models.values():
        for _ in range(5):
            gpus = int(rng.integers(1, 33))
            progress = float(rng.uniform(0, model.progress_at(model.trace.max_epochs)))
            job = Job("j", model.name, 0.0, gpus, model.init_batch * int(rng.integers(1, 4)))
            layout = packed_layout(gpus, 4, 16)
            best = model.choose(layout, progress, job, adaptive=True)
            fixed = model.choose(layout, progress, job, adaptive=False)
            assert best.goodput >= fixed.goodput * (1 - 1e-9) or model.trace.fixed_batch
            assert best.batch <= model.max_batch
            assert best.goodput > 0 and best.throughput > 0


def test_goodput_curve_matches_choose_and_is_zero_without_gpus(
    models: dict[str, AppModel],
) -> None:
    model = models["cifar10"]
    job = Job("j", "cifar10", 0.0, 4, 512)
    curve = model.goodput_curve(job, 1000.0, 16, 4, 16, adaptive=True)
    assert curve[0] == 0.0
    for n in (1, 3, 8, 16):
        expected = model.choose(packed_layout(n, 4, 16), 1000.0, job, adaptive=True).goodput
        assert np.isclose(curve[n], expected)


def test_work_and_epochs(models: dict[str, AppModel]) -> None:
    model = models["bert"]
    job = Job("j", "bert", 0.0, 1, 12)
    assert model.work(job) == model.progress_at(model.trace.max_epochs)
    one = Job("k", "bert", 0.0, 1, 12, epochs=1)
    assert 0 < model.work(one) < model.work(job)
    assert model.epoch_of(0.0) == 0
    assert model.epoch_of(model.progress_at(1)) == 1
