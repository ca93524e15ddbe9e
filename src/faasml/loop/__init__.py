"""The user's own PyTorch training loop as a trainable (docs/your-own-loop.md).

``context`` (the ``ctx`` a loop receives), ``sync`` (the prepared optimiser: gradients and
buffers averaged over the trial's functions), ``segment`` (one invocation of a loop, for the
worker), ``model`` (what the Tuner learns of a loop; its size for the planner), ``probe`` (a
loop timed for the job profile), ``shipping`` (a training function sent by reference through
the run's object store). This module imports no torch: a worker asks ``is_loop``
for every job.
"""

from __future__ import annotations

LOOP_FACTORY = "faasml.loop.model:loop_model"
"""The model name a loop job's ``model:`` carries."""
KEY_OPTION = "function_key"
"""The model option naming a training function sent by reference (``shipping``): its key in
the object store the option ``function_store`` names."""


def is_loop(model_name: str) -> bool:
    """Whether a job's model is a training loop (run by ``segment.run_loop``, not the
    built-in training step)."""
    return model_name == LOOP_FACTORY


__all__ = ["KEY_OPTION", "LOOP_FACTORY", "is_loop"]
