"""Search algorithms behind one narrow contract (propose / observe / done) and a registry.

``SEARCHERS`` names the implementations (``gp-ei``, ``random``, ``grid``, and ``tpe``:
Optuna's, wrapped); ``create_searcher`` builds one by name; ``faasml.search.deployment`` uses
them to choose a deployment (functions × memory × storage) from measured probes (SMLT §3.2).
See docs/search.md.
"""

from __future__ import annotations

from typing import Any

from faasml.registry import Registry
from faasml.search._base import CHOICES, SearchBudget, Searcher, check_choice

SEARCHERS: Registry[type[Searcher]] = Registry("searcher")
SEARCHERS.register("gp-ei", "faasml.search._gp:GPEISearcher")
SEARCHERS.register("random", "faasml.search._simple:RandomSearcher")
SEARCHERS.register("grid", "faasml.search._simple:GridSearcher")
SEARCHERS.register("tpe", "faasml.search._tpe:TPESearcher")


def create_searcher(
    name: str,
    features: Any,
    budget: SearchBudget,
    *,
    seed: int = 0,
    prior: Any = None,
    objective: Any = None,
    costs: Any = None,
    **model: Any,
) -> Searcher:
    """The searcher ``name`` over ``features`` (one row per candidate, scaled to [0, 1]).
    ``prior`` (a mean per candidate) warm-starts the searchers that use one (``gp-ei``); the
    others ignore it. ``objective`` (a ``LatentObjective``, for those same searchers) makes
    observations a latent quantity with an objective and a constraint on it; the others
    observe the objective.
    ``costs`` (predicted price of each probe) keeps every searcher within ``budget.max_usd``.
    ``model``: further options of the model-based searchers (``gp-ei``: ``terms``,
    ``center``, ``term_sd``); the others ignore them."""
    cls = SEARCHERS.get(name)
    if getattr(cls, "uses_prior", False):
        return cls(  # type: ignore[call-arg]
            features, budget, seed, prior=prior, objective=objective, costs=costs, **model
        )
    return cls(features, budget, seed, costs=costs)


def __getattr__(name: str) -> Any:
    """``GPEISearcher`` and ``LatentObjective`` on first use (they import scipy)."""
    if name in ("GPEISearcher", "LatentObjective"):
        from faasml.search import _gp

        return getattr(_gp, name)
    raise AttributeError(f"module 'faasml.search' has no attribute {name!r}")


__all__ = [
    "CHOICES",
    "SEARCHERS",
    "GPEISearcher",
    "LatentObjective",
    "SearchBudget",
    "Searcher",
    "check_choice",
    "create_searcher",
]
