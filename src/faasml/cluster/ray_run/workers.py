"""The Ray actors of a real run (training replicas, serving slots) and a job's driver-side state."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from faasml._imports import optional_import
from faasml.cluster.plain import Job, Placement
from faasml.cluster.ray_run.outcomes import JobOutcome


def _data(seed: int, n: int = 2048) -> tuple[Any, Any]:
    torch = optional_import("torch", "torch")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def _mlp(seed: int) -> Any:
    torch = optional_import("torch", "torch")
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


class TrainWorker:
    """One data-parallel replica of a job: the gradient of its share of each batch."""

    def __init__(self, seed: int, rank: int, replicas: int, batch: int) -> None:
        torch = optional_import("torch", "torch")
        torch.set_num_threads(1)
        self.x, self.y = _data(seed)
        self.model = _mlp(seed)
        self.rank, self.replicas = rank, replicas
        self.share = max(batch // replicas, 1)

    def grad(self, params: list[Any], step: int) -> tuple[list[Any], float]:
        torch = optional_import("torch", "torch")
        with torch.no_grad():
            for p, v in zip(self.model.parameters(), params, strict=True):
                p.copy_(torch.as_tensor(v))
        n = len(self.x)
        start = ((step * self.replicas + self.rank) * self.share) % n
        idx = torch.arange(start, start + self.share) % n
        self.model.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(self.x[idx]), self.y[idx])
        loss.backward()
        return [p.grad.numpy().copy() for p in self.model.parameters()], float(loss)


class InferenceWorker:
    """A warm serving slot on one GPU of a server: every service's small model loaded, a
    forward pass of the service's model per request (the slot serves the service it is
    given to this round)."""

    def __init__(self, seeds: list[int]) -> None:
        torch = optional_import("torch", "torch")
        torch.set_num_threads(1)
        self.models = [_mlp(seed).eval() for seed in seeds]

    def infer(self, service: int, x: Any) -> float:
        torch = optional_import("torch", "torch")
        with torch.no_grad():
            return float(self.models[service](torch.as_tensor(x)).sum())


class RealJob:
    """A training job's state in the driver (the parameter server) and its workers."""

    def __init__(self, job: Job, seed: int, steps: int, batch: int, ckpt: Path) -> None:
        torch = optional_import("torch", "torch")
        self.job = job
        self.seed = seed
        self.work = steps
        self.batch = batch
        self.model = _mlp(seed)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.ckpt = ckpt
        self.placement: Placement = ()
        self.workers: list[Any] = []
        self.inflight: Any = None
        self.limit = 0
        """Steps the job may reach this round (``RunConfig.steps_per_round``)."""
        self.outcome = JobOutcome(job.name, job.arrival_s)

    def params(self) -> list[Any]:
        return [p.detach().numpy().copy() for p in self.model.parameters()]

    def apply(self, results: list[tuple[list[Any], float]]) -> None:
        torch = optional_import("torch", "torch")
        for i, p in enumerate(self.model.parameters()):
            p.grad = torch.as_tensor(np.mean([r[0][i] for r in results], axis=0))
        self.opt.step()
        loss = float(np.mean([r[1] for r in results]))
        if math.isnan(self.outcome.first_loss):
            self.outcome.first_loss = loss
        self.outcome.last_loss = loss
        self.outcome.steps += 1

    def checkpoint(self) -> None:
        """Write model, optimiser and step to the checkpoint file, then read them back (a
        restart resumes from the file, as on another server)."""
        torch = optional_import("torch", "torch")
        tmp = self.ckpt.with_suffix(".tmp")
        torch.save(
            {
                "model": self.model.state_dict(),
                "opt": self.opt.state_dict(),
                "steps": self.outcome.steps,
            },
            tmp,
        )
        tmp.replace(self.ckpt)
        saved = torch.load(self.ckpt, weights_only=True)
        self.model = _mlp(self.seed)
        self.model.load_state_dict(saved["model"])
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.opt.load_state_dict(saved["opt"])
        self.outcome.steps = int(saved["steps"])
        self.outcome.step_history.append(self.outcome.steps)
