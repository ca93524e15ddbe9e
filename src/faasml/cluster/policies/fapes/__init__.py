"""FaPES-Scheduler for training jobs (Zhao et al., SoCC 2024, §5): filter, prioritise, plan.

1. Filtering (§5.1): running jobs that will not finish within the next round are candidates,
   ranked by performance achievement; they are recycled one by one while sharing the free
   and recycled GPUs evenly over the cohort (queued jobs plus recycled ones) still raises
   the cohort's average achievement (goodput over the best goodput the model allows) by
   ``min_gain``. Candidates are ranked by increasing achievement (the paper) when no job
   is queued — idle GPUs go to the jobs furthest from their best — and, while jobs queue,
   by goodput per GPU relative to the job's best, so that the jobs using their GPUs least
   efficiently give them up first (``rank="per_gpu"``; ``rank="achievement"`` always uses
   the paper's ranking).
2. Prioritising (§5.2): rescheduled jobs that waited ``popup_rounds`` rounds pop up first;
   then queued jobs by waiting time (ties: least remaining time first); then recycled jobs,
   higher achievement first.
3. Planning (§5.3): each job in turn gets the plan of least completion time plus price
   (:func:`faasml.cluster.planning.plan_schedule`) against the board, which it then joins.
   Our addition: each job's completion time is weighted by its rank from the longest active
   job (shortest = most), ``(rank / mean rank) ** srpt`` — the marginal weights of heSRPT
   (Berg et al., 2020) for least mean completion time — so short jobs buy more GPUs and
   long ones leave room; ``srpt=0`` weighs all jobs alike (eq. 6 as printed). The default
   exponent 2 is a measured choice, not a derived one (its measurements:
   benchmarks/results/cluster_policies.md).
4. Back-filling (our addition): GPUs that no plan uses in the current round (reserved for
   later rounds, or left by fragmentation) go for this round to the jobs whose weighted
   Pollux fitness (−1/speedup) they raise most, queued jobs first; a job back-filled in the
   last round keeps those GPUs while they stay free, so it does not restart. Restarts are
   weighed (``backfill_restarts`` > 0): every choice but a running job's current GPUs (its
   plan's, or its plan's plus last round's back-fill still free) loses a restart out of
   the round, and back-filled GPUs lose the restart of their taking back, spread over the
   rounds the board leaves them free (not charged to a job keeping last round's back-fill).
   A job counts as keeping its GPUs when its placement after :func:`restore_servers` (run
   before back-filling, and again after it) is exactly what it holds.
5. Placement (ours): a job whose GPU count is unchanged takes its servers back from the jobs
   that restart anyway (:func:`restore_servers`), and every plan follows the servers its job
   got (:func:`follow_plan`), so the swap is not redone every round.

Compensation for estimation error (end of §5.3): a job that outlives its plan keeps its last
placement; one that finishes early leaves the board at once. Rescheduling never preempts a
running job: it holds one of its GPUs until its turn. Jobs co-adapt batch size and GPUs.
"""

from __future__ import annotations

from faasml.cluster.policies.fapes.placement import follow_plan, restore_servers
from faasml.cluster.policies.fapes.scheduler import FapesPolicy

__all__ = ["FapesPolicy", "follow_plan", "restore_servers"]
