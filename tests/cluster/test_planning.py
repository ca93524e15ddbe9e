from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from faasml.cluster import Cluster, Server
from faasml.cluster.board import Board
from faasml.cluster.planning import FOREVER, Pricing, SlotMarket, plan_schedule, slot_bounds

from .reference_planning import reference_plan


def concave_curve(top: int, alpha: float) -> np.ndarray:
    n = np.arange(top + 1, dtype=np.float64)
    return n**alpha


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    top=st.integers(1, 24),
    alpha=st.floats(0.3, 1.0),
    work=st.floats(10.0, 50_000.0),
    busy=st.integers(0, 14),
)
def test_plans_fit_the_board_and_finish_the_work(
    seed: int, top: int, alpha: float, work: float, busy: int
) -> None:
    rng = np.random.default_rng(seed)
    cluster = Cluster.uniform(4, 4, 2)
    board = Board(cluster, 100, 64)
    for _ in range(busy):  # other jobs' plans on random servers and rounds
        sid = int(rng.integers(4))
        start = 100 + int(rng.integers(0, 40))
        board.occupy((sid,), start, start + int(rng.integers(1, 30)))
    before = board.load.copy()
    curve = concave_curve(top, alpha)
    plan = plan_schedule(
        curve, work, board, (), Pricing(1.0, 4.0), round_s=60.0, restart_s=5.0, slots=8, chunks=16
    )
    if plan is None:
        return
    assert plan.segments[0].start >= 100
    done = 0.0
    for seg in plan.segments:
        end = seg.end if seg.end < 100 + FOREVER else max(seg.start + 1, 164)
        for sid, count in Counter(seg.placement).items():
            peak = before[sid, seg.start - 100 : min(end - 100, 64)].max(initial=0)
            assert peak + count <= cluster.servers[sid].gpus
        rounds = (seg.end - seg.start) if seg.end < 100 + FOREVER else FOREVER
        done += curve[len(seg.placement)] * 60.0 * rounds
    assert done >= work * (1 - 1e-6)
    # once started, a plan never pauses
    sizes = [len(s.placement) for s in plan.segments]
    first = next(i for i, n in enumerate(sizes) if n)
    assert all(sizes[first:])
    assert 0.0 < plan.achievement <= 1.0 + 1e-9


def test_a_running_job_starts_at_once_and_a_full_board_delays_a_new_one() -> None:
    cluster = Cluster.uniform(2, 4)
    board = Board(cluster, 0, 64)
    board.occupy((0,) * 4 + (1,) * 4, 0, 5)  # everything busy for five rounds
    curve = concave_curve(8, 0.9)
    plan = plan_schedule(
        curve,
        2000.0,
        board,
        (),
        Pricing(1.0, 2.0),
        round_s=60.0,
        restart_s=5.0,
        slots=12,
        chunks=16,
    )
    assert plan is not None
    assert plan.placement_at(0) in ((), None)
    assert plan.placement_at(plan.segments[-1].start)
    free_board = Board(cluster, 0, 64)
    running = plan_schedule(
        curve,
        2000.0,
        free_board,
        (0, 0),
        Pricing(1.0, 2.0),
        round_s=60.0,
        restart_s=5.0,
        slots=12,
        chunks=16,
    )
    assert running is not None and running.placement_at(0)
    assert set(running.placement_at(0) or ()) >= {0}  # keeps its server


@settings(max_examples=20, deadline=None)
@given(alpha=st.floats(0.4, 0.95), work=st.floats(500.0, 20_000.0), busy=st.integers(0, 6))
def test_a_heavier_completion_time_never_plans_a_later_finish(
    alpha: float, work: float, busy: int
) -> None:
    cluster = Cluster.uniform(4, 4, 2)
    board = Board(cluster, 0, 64)
    for sid in range(min(busy, 4)):
        board.occupy((sid,) * 2, 0, 20)
    curve = concave_curve(16, alpha)

    def finish(weight: float) -> int:
        plan = plan_schedule(
            curve,
            work,
            board,
            (),
            Pricing(5.0, 20.0),
            round_s=60.0,
            restart_s=5.0,
            slots=12,
            chunks=16,
            weight=weight,
        )
        assert plan is not None
        return plan.end

    assert finish(8.0) <= finish(1.0) <= finish(0.125)


def test_a_plan_ends_when_its_work_is_done_not_at_its_slot_end() -> None:
    cluster = Cluster.uniform(1, 4)
    curve = concave_curve(4, 1.0)  # one unit per GPU-second
    plan = plan_schedule(
        curve,
        4 * 60.0 * 2.5,  # 2.5 rounds on 4 GPUs
        Board(cluster, 0, 64),
        (0, 0, 0, 0),
        Pricing(0.0, 0.0),
        round_s=60.0,
        restart_s=5.0,
        slots=4,
        chunks=8,
    )
    assert plan is not None
    assert plan.end == 3  # not rounded up to a whole slot of several rounds
    assert plan.placement_at(0) == (0, 0, 0, 0)


def random_board(seed: int, sizes: list[int], rounds: int, plans: int) -> Board:
    rng = np.random.default_rng(seed)
    cluster = Cluster(tuple(Server(i, g, i // 2) for i, g in enumerate(sizes)))
    board = Board(cluster, 50, rounds)
    for _ in range(plans):
        sid = int(rng.integers(len(sizes)))
        start = 50 + int(rng.integers(-5, rounds))
        count = int(rng.integers(1, sizes[sid] + 1))
        if board.load[sid].max() + count <= sizes[sid]:
            board.occupy((sid,) * count, start, start + int(rng.integers(1, rounds)))
    return board


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    sizes=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=12),
    width=st.integers(1, 20),
    slots=st.integers(1, 12),
    ratio=st.sampled_from([1.0, 1.0 + 1e-12, 2.0, 4.0]),
    top=st.integers(1, 40),
)
def test_slot_market_matches_a_per_slot_sort_of_the_servers(
    seed: int, sizes: list[int], width: int, slots: int, ratio: float, top: int
) -> None:
    """Free GPUs, prices, server order and cheapest-GPU sums of all slots at once equal
    those of one slot at a time (``free_in``, ``price``, a lexsort by price then most free
    GPUs then id), on mixed server sizes and slots that run past the board."""
    board = random_board(seed, sizes, 30, 3 * len(sizes))
    bounds = slot_bounds(width * slots, slots)
    market = SlotMarket(board, bounds, Pricing(2.0, 2.0 * ratio))
    cum, avail = market.cheapest(top)
    for t in range(slots):
        free = board.free_in(bounds[t], bounds[t + 1])
        price = board.price(free, 2.0, 2.0 * ratio) * (bounds[t + 1] - bounds[t])
        assert (market.free[t] == free).all()
        order, got_free, got_price = market.servers(t)
        assert (got_free == free).all() and (got_price == price).all()
        want = [int(s) for s in np.lexsort((-free, price)) if free[s] > 0]
        assert order.tolist() == want
        per_gpu = np.repeat(price[want], free[want])[:top]
        assert avail[t] == len(per_gpu)
        assert (cum[t, : len(per_gpu) + 1] == np.concatenate([[0.0], np.cumsum(per_gpu)])).all()


def test_free_slots_of_unequal_and_clamped_slots_match_free_in() -> None:
    board = random_board(7, [4, 8, 2, 8], 20, 30)
    bounds = [0, 3, 4, 9, 19, 20, 25, 40]
    free = board.free_slots(bounds)
    for t in range(len(bounds) - 1):
        assert (free[t] == board.free_in(bounds[t], bounds[t + 1])).all()


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    sizes=st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=10),
    top=st.integers(1, 48),
    alpha=st.floats(0.2, 1.0),
    plateau=st.integers(1, 48),
    work=st.floats(1.0, 200_000.0),
    running=st.integers(0, 12),
    ratio=st.sampled_from([1.0, 1.5, 4.0]),
    weight=st.floats(0.1, 3.0),
    slots=st.integers(1, 12),
    chunks=st.sampled_from([2, 7, 16, 32]),
)
def test_plan_search_matches_the_straightforward_one(
    seed: int,
    sizes: list[int],
    top: int,
    alpha: float,
    plateau: int,
    work: float,
    running: int,
    ratio: float,
    weight: float,
    slots: int,
    chunks: int,
) -> None:
    """The vectorised plan search (all slots at once, GPU counts that add nothing left out,
    early stops) gives exactly the plan of the slot-by-slot search it replaced, for new and
    running jobs, on mixed server sizes, flat goodput curves and uneven boards."""
    board = random_board(seed, sizes, 40, 4 * len(sizes))
    curve = concave_curve(top, alpha)
    curve = np.minimum(curve, curve[min(plateau, top)])  # goodput stops rising
    current = tuple(sorted(np.random.default_rng(seed).integers(0, len(sizes), running)))
    args = (curve, work, board, tuple(int(s) for s in current), Pricing(3.0, 3.0 * ratio))
    options = {"round_s": 60.0, "restart_s": 5.68, "slots": slots, "chunks": chunks}
    want = reference_plan(*args, weight=weight, **options)
    assert plan_schedule(*args, weight=weight, **options) == want
