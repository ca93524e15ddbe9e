"""Real elastic jobs and inference services on a local multi-node Ray cluster.

``faasml cluster run`` drives small real PyTorch training jobs and small inference services
under a cluster policy and FaPES-Manager loans, on Ray nodes that stand for GPU servers.
GPUs are logical here: each node ``i`` has a custom resource ``server<i>`` with one unit per
GPU, and a worker takes one unit, so the policy's placement decides the node it runs on.

- **Training job**: data-parallel SGD of a small MLP on a seeded synthetic regression set.
  Each of its workers (a Ray actor on one "GPU" of its placement) computes the gradient of
  its share of the batch; the driver averages them and steps the optimiser (the driver is
  the parameter server). One step = one unit of progress.
- **Rescaling = checkpoint and restart** (FaPES Table 2's steps): when a job's placement
  changes, its in-flight step finishes, the model and optimiser are written to a checkpoint
  file, its workers are stopped (``ray.kill``), the state is read back from the file and new
  workers start on the new placement. A reclaimed server's workers are stopped this way, so
  nothing is lost beyond the checkpoint (taken at the step boundary: nothing at all).
- **Inference service**: workers (actors) each hold a small model; the driver sends
  requests at the service's trace rate (a trace day compressed into ``day_s`` seconds, rates
  scaled by ``rate_scale``), round-robin over the service's workers, and measures each
  request's latency (send to result) against the SLO.
- **Driver**: the cluster simulator's (:class:`~faasml.cluster.simulator.Simulator`:
  arrivals, inference sized first and servers loaned or reclaimed, the policy on the
  training VC, restart accounting), with :class:`RayExecutor` (workers restarted at
  ``place``, their steps read back at ``advance``), :class:`RayServing` (the services'
  slots) and :class:`RayClock`, a wall clock that, while it passes, runs a single-threaded
  event loop (``ray.wait``) keeping one step of every placed job in flight and sending the
  requests when due.

Differences from real GPUs: the policies plan with the performance model of the job's
application from the traces (a real deployment would profile the job), so their choices are
the ones they would make for that application, not for the MLP; on real GPUs the workers
would all-reduce with NCCL inside the job (e.g. torch DDP) instead of through the driver,
and a "GPU" here is a slot on a CPU core shared with everything else.

With ``calibrate`` placements the runner first measures the job's step and restart times
(:meth:`RayRunner.calibrate`); :mod:`faasml.cluster.ray_predict` fits the simulator's model
to them and predicts the run (``faasml cluster run --predict``).
"""

from __future__ import annotations

from faasml.cluster.ray_run.config import DAY_S, RunConfig
from faasml.cluster.ray_run.executor import RayExecutor
from faasml.cluster.ray_run.local import run_on_ray
from faasml.cluster.ray_run.outcomes import Calibration, JobOutcome, RunResult, StepSample
from faasml.cluster.ray_run.runner import RayClock, RayRunner
from faasml.cluster.ray_run.serving import RayServing
from faasml.cluster.ray_run.sizing import InferenceSizer, route
from faasml.cluster.ray_run.workers import InferenceWorker, TrainWorker

__all__ = [
    "DAY_S",
    "Calibration",
    "InferenceSizer",
    "InferenceWorker",
    "JobOutcome",
    "RayClock",
    "RayExecutor",
    "RayRunner",
    "RayServing",
    "RunConfig",
    "RunResult",
    "StepSample",
    "TrainWorker",
    "route",
    "run_on_ray",
]
