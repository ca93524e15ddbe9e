"""Elastic data-parallel PyTorch jobs on the nodes of a Ray cluster: the task, its worker
actors and :class:`RayExecutor`, the :class:`~.executor.Executor` contract on real processes
(the node map, rescales from checkpoints, nodes lost with no notice). See
:mod:`faasml.cluster.scavenge.ray_executor` for the whole story and the real-time driver."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faasml._imports import optional_import
from faasml.cluster.scavenge._records import ScavengeJob
from faasml.exceptions import ConfigError

NODE_RESOURCE = "scavenge-node:"
"""Prefix of the custom resource that names an idle node (one unit per node)."""


def node_resource(node: str) -> str:
    return NODE_RESOURCE + node


@dataclass(frozen=True)
class ElasticTask:
    """A small real training task: an MLP classifier on a seeded synthetic data set.
    ``batch_per_node``: each worker's minibatch (global batch = nodes × it)."""

    features: int = 16
    hidden: int = 32
    classes: int = 4
    examples: int = 4096
    batch_per_node: int = 32
    lr: float = 0.05
    seed: int = 0


class _Worker:
    """One data-parallel replica on one node (a Ray actor)."""

    def __init__(self, task: ElasticTask, rank: int, world: int, checkpoint: str) -> None:
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.task = task
        self.checkpoint = checkpoint
        gen = torch.Generator().manual_seed(task.seed)
        centres = torch.randn(task.classes, task.features, generator=gen) * 2.0
        self.labels = torch.randint(0, task.classes, (task.examples,), generator=gen)
        self.data = centres[self.labels] + torch.randn(task.examples, task.features, generator=gen)
        self.reset(rank, world)

    def reset(self, rank: int, world: int) -> tuple[int, float]:
        """(Re)join the job as ``rank`` of ``world``: a fresh replica loaded from the last
        checkpoint (an elastic restart keeps the process, not its training state)."""
        torch = self.torch
        task = self.task
        self.rank, self.world = rank, world
        self.x, self.y = self.data[rank::world], self.labels[rank::world]
        torch.manual_seed(task.seed)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(task.features, task.hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(task.hidden, task.classes),
        )
        self.opt = torch.optim.SGD(self.model.parameters(), lr=task.lr)
        self.step = 0
        self.samples = 0.0
        if os.path.exists(self.checkpoint):
            # weights_only: a checkpoint file is read, never unpickled into arbitrary objects
            saved = torch.load(self.checkpoint, weights_only=True)
            self.model.load_state_dict(saved["model"])
            self.opt.load_state_dict(saved["opt"])
            self.step, self.samples = int(saved["step"]), float(saved["samples"])
        return self.step, self.samples

    def grad(self) -> tuple[Any, float]:
        torch = self.torch
        b = self.task.batch_per_node
        start = (self.step * b) % max(len(self.x) - b, 1)
        xb, yb = self.x[start : start + b], self.y[start : start + b]
        self.model.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(xb), yb)
        loss.backward()
        flat = torch.cat(
            [p.grad.reshape(-1) for p in self.model.parameters() if p.grad is not None]
        )
        return flat.numpy(), float(loss)

    def apply(self, mean_grad: Any, samples: float) -> int:
        torch = self.torch
        flat = torch.as_tensor(mean_grad)
        at = 0
        for p in self.model.parameters():
            n = p.numel()
            p.grad = flat[at : at + n].reshape(p.shape).clone()
            at += n
        self.opt.step()
        self.step += 1
        self.samples += samples
        return self.step

    def save(self) -> tuple[int, float]:
        torch = self.torch
        temporary = f"{self.checkpoint}.{os.getpid()}.tmp"
        state = {
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
            "step": self.step,
            "samples": self.samples,
        }
        torch.save(state, temporary)
        os.replace(temporary, self.checkpoint)
        return self.step, self.samples

    def loss(self) -> float:
        with self.torch.no_grad():
            return float(self.torch.nn.functional.cross_entropy(self.model(self.x), self.y))


@dataclass
class RealJob:
    """The driver's record of one real job."""

    spec: ScavengeJob
    task: ElasticTask
    checkpoint: Path
    nodes: tuple[str, ...] = ()
    workers: dict[str, Any] = field(default_factory=dict)  # node → worker actor
    stale: bool = False  # a worker died: the others wait for a restart from the checkpoint
    busy_s: float = 0.0  # wall time of its own training steps (the Job Monitor's clock)
    samples: float = 0.0
    saved_samples: float = 0.0
    step: int = 0
    saved_step: int = 0
    lost_samples: float = 0.0
    rescales: int = 0
    preemptions: int = 0
    resumed_from: list[int] = field(default_factory=list)
    finished: bool = False
    losses: list[float] = field(default_factory=list)
    history: list[tuple[float, int]] = field(default_factory=list)


class RayExecutor:
    """The :class:`~.executor.Executor` contract on a Ray cluster (module docstring of
    :mod:`~faasml.cluster.scavenge.ray_executor`).
    ``checkpoint_every``: steps between periodic checkpoints."""

    def __init__(self, checkpoint_dir: Path, *, checkpoint_every: int = 5) -> None:
        if checkpoint_every < 1:
            raise ConfigError(f"checkpoint_every is {checkpoint_every}, but must be >= 1")
        self.ray = optional_import("ray", "ray")
        optional_import("torch", "torch")
        self.dir = Path(checkpoint_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_every = checkpoint_every
        self.jobs: dict[str, RealJob] = {}
        self._actor = self.ray.remote(num_cpus=0)(_Worker)

    def add(self, spec: ScavengeJob, task: ElasticTask) -> RealJob:
        job = RealJob(spec, task, self.dir / f"{spec.job}.pt")
        self.jobs[spec.job] = job
        return job

    def _stop(self, job: RealJob, nodes: Iterable[str] | None = None) -> None:
        for node in list(job.workers if nodes is None else nodes):
            worker = job.workers.pop(node, None)
            if worker is not None:
                self.ray.kill(worker, no_restart=True)

    def _restart(self, job: RealJob, nodes: tuple[str, ...]) -> None:
        """Workers on ``nodes``: kept nodes' workers reset from the checkpoint (cheap), new
        nodes get new worker processes (slow: adding nodes costs more than removing)."""
        self._stop(job, [n for n in job.workers if n not in nodes])
        calls = []
        for rank, node in enumerate(nodes):
            worker = job.workers.get(node)
            if worker is None:
                worker = self._actor.options(resources={node_resource(node): 1}).remote(
                    job.task, rank, len(nodes), str(job.checkpoint)
                )
                job.workers[node] = worker
                calls.append(worker.reset.remote(rank, len(nodes)))
            else:
                calls.append(worker.reset.remote(rank, len(nodes)))
        positions = self.ray.get(calls)
        step, samples = positions[0]
        job.resumed_from.append(step)
        job.step, job.samples = step, samples
        job.stale = False

    def _ordered(self, job: RealJob) -> list[Any]:
        return [job.workers[n] for n in job.nodes if n in job.workers]

    def apply(self, now: float, assignment: Mapping[str, tuple[str, ...]]) -> list[str]:
        """Rescale: checkpoint (unless a worker died) and give up the nodes each job loses,
        then restart on the new nodes. Every node is released before any job starts on one:
        a node holds one worker, so a worker started on a node whose old worker still runs
        would wait for ever (the order of the jobs decided it)."""
        changed = [
            name
            for name, nodes in assignment.items()
            if set(nodes) != set(self.jobs[name].nodes) or self.jobs[name].stale
        ]
        for name in changed:
            job = self.jobs[name]
            if job.workers and not job.stale:
                head = self._ordered(job)[0]
                job.saved_step, job.saved_samples = self.ray.get(head.save.remote())
            self._stop(job, [n for n in job.workers if n not in assignment[name]])
        for name in changed:
            job = self.jobs[name]
            nodes = assignment[name]
            job.rescales += 1
            job.nodes = tuple(nodes)
            job.history.append((now, len(nodes)))
            if nodes:
                self._restart(job, job.nodes)
            else:
                self._stop(job)
                job.stale = False
        return changed

    def preempt(self, now: float, nodes: Iterable[str]) -> list[str]:
        """The nodes are gone (their workers died with them): each job on them falls back to
        its last checkpoint and waits for :meth:`apply` to restart it."""
        taken = set(nodes)
        hit = []
        for name, job in self.jobs.items():
            if taken & set(job.nodes):
                for node in taken & set(job.workers):
                    job.workers.pop(node)
                if not job.stale:
                    self._lose(job)
                job.nodes = tuple(n for n in job.nodes if n not in taken)
                hit.append(name)
        return hit

    def _lose(self, job: RealJob) -> None:
        job.stale = True
        job.preemptions += 1
        job.lost_samples += job.samples - job.saved_samples
        job.samples, job.step = job.saved_samples, job.saved_step

    def samples(self, job: str, now: float) -> float:
        return self.jobs[job].samples

    def train_round(self) -> dict[str, float]:
        """One synchronous step of every job with workers (one job after another, so each
        job's step time is its own); returns samples each processed. A job whose worker
        died (its node went away) falls back to its checkpoint."""
        ray = self.ray
        done: dict[str, float] = {}
        for name, job in self.jobs.items():
            if not job.workers or job.finished or job.stale:
                continue
            workers = self._ordered(job)
            started = time.perf_counter()
            try:
                grads = ray.get([w.grad.remote() for w in workers])
                mean = sum(g for g, _ in grads) / len(grads)
                batch = float(job.task.batch_per_node * len(grads))
                ray.get([w.apply.remote(mean, batch) for w in workers])
            except ray.exceptions.RayActorError:
                self._lose(job)
                continue
            job.busy_s += time.perf_counter() - started
            job.losses.append(sum(loss for _, loss in grads) / len(grads))
            job.step += 1
            job.samples += batch
            done[name] = batch
            if job.step % self.checkpoint_every == 0:
                job.saved_step, job.saved_samples = ray.get(workers[0].save.remote())
        return done

    def finish(self, name: str, now: float) -> tuple[str, ...]:
        job = self.jobs[name]
        if job.workers and not job.stale:
            head = self._ordered(job)[0]
            job.saved_step, job.saved_samples = self.ray.get(head.save.remote())
        self._stop(job)
        job.finished = True
        freed, job.nodes = job.nodes, ()
        job.history.append((now, 0))
        return freed

    def shutdown(self) -> None:
        for job in self.jobs.values():
            self._stop(job)
