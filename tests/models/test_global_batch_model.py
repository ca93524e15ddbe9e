"""The performance model of a job faasml runs: its batch size is the global batch B, so an
epoch has max(1, ⌊S/B⌋) rounds whatever n is (eq. 2's k), and no allocation splits B over more
than ⌊B/2⌋ functions; a paper's profile keeps its per-function b_z."""

from __future__ import annotations

import dataclasses

import numpy as np

from faasml.catalog import load_catalog
from faasml.models import Exclusions, allocation_space, evaluate
from faasml.models.perf import epoch_time
from faasml.workload import load_workload
from faasml.workloads import global_batch

AWS = load_catalog("aws-lambda")
PAPER = load_workload("mobilenet-cifar10")  # b_z = 128 per function
JOB = dataclasses.replace(PAPER, samples=50_000, batch_size=64, global_batch=True)


def test_a_global_batch_has_the_same_rounds_per_epoch_on_any_number_of_functions() -> None:
    counts = np.array([1, 2, 4, 8, 32])
    rounds = JOB.iterations_per_epoch(counts)
    assert rounds.tolist() == [50_000 // 64] * 5
    assert rounds[0] == global_batch.rounds_per_epoch(50_000, 64)
    # A paper's per-function b_z: k = ⌈S / (n · b_z)⌉ falls with n.
    assert PAPER.iterations_per_epoch(counts).tolist() == [391, 196, 98, 49, 13]


def test_eq_2_prices_k_synchronisations_of_the_global_batch_and_d_over_n_computation() -> None:
    counts, memory = np.array([1, 2, 4, 8]), np.full(4, 3008)
    job = epoch_time(
        JOB, AWS.platform, AWS.storages["s3"], AWS.storages["s3"], "allreduce", counts, memory
    )
    paper = epoch_time(
        PAPER, AWS.platform, AWS.storages["s3"], AWS.storages["s3"], "allreduce", counts, memory
    )
    assert job.iterations.tolist() == [781] * 4
    # The computation is the partition's (D/n rows each, B/n of them a round) in both.
    np.testing.assert_allclose(job.compute_s, paper.compute_s)
    # More functions no longer cut the rounds: every round synchronises all n.
    assert np.all(job.sync_s[1:] > paper.sync_s[1:])


def test_no_allocation_gives_a_function_fewer_than_two_rows_of_the_global_batch() -> None:
    small = dataclasses.replace(JOB, batch_size=16)
    out = Exclusions()
    table = evaluate(
        small, AWS, np.arange(1, 21)[:, None], np.array([[3008]]), "s3", "allreduce", exclusions=out
    )
    assert table.n.max() == global_batch.max_functions(16) == 8
    assert out.counts["global batch under 2 rows per function"] == 12
    space = allocation_space(small, AWS, memory_step_mb=1024, max_functions=50)
    assert space.n.max() <= 8
    # A paper's profile keeps its rule: one full per-function batch each.
    paper_space = allocation_space(PAPER, AWS, memory_step_mb=1024, max_functions=50)
    assert paper_space.n.max() > 8
