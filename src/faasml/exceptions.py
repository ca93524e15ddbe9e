"""One base error the CLI catches, and a few subclasses that say what went wrong."""

from __future__ import annotations


class FaasmlError(Exception):
    """Base class of every error faasml raises on purpose."""


class ConfigError(FaasmlError, ValueError):
    """A value in a file, a flag or an argument breaks a rule; the message names both."""


class CatalogError(ConfigError):
    """A catalog file is missing a field or holds a bad value."""


class WorkloadError(ConfigError):
    """A workload profile is missing a field or holds a bad value."""


class RecordError(ConfigError):
    """A run's record.json is damaged: a field missing, of the wrong type or against another."""


class UnknownNameError(ConfigError, KeyError):
    """A name looked up in a registry is not there; the message lists the choices."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InfeasibleConstraintError(FaasmlError):
    """No allocation meets the constraint; carries the least budget or deadline that would."""

    def __init__(
        self,
        message: str,
        *,
        least_budget_usd: float | None = None,
        least_deadline_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.least_budget_usd = least_budget_usd
        self.least_deadline_s = least_deadline_s


class MissingDependencyError(FaasmlError, ImportError):
    """An optional dependency is not installed; the message says which extra provides it."""


class StoreUnavailableError(FaasmlError):
    """A store's server cannot be reached (after retries); the message names the endpoint."""


class FunctionError(FaasmlError):
    """A function invocation failed; ``kind`` says why
    (``faasml.runtime.platforms.contract.FAILURE_KINDS``: error, out-of-memory, timeout, killed,
    cancelled), ``detail`` holds the traceback."""

    def __init__(self, kind: str, message: str, detail: str = "") -> None:
        super().__init__(f"function {kind}: {message}")
        self.kind = kind
        self.detail = detail


class DivergedError(FaasmlError):
    """Every trial of a tuning run diverged (a NaN or infinite loss): it has no best."""


class TrialsLostError(FaasmlError):
    """A tuning run lost trials (they failed after repeated restarts): its ranking is of the
    trials left. ``results`` holds the run's results all the same (``faasml.ResultGrid``:
    the best of the trials that trained, the run directory), so nothing is lost with it."""

    def __init__(self, message: str, *, results: object) -> None:
        super().__init__(message)
        self.results = results


class UnreachableTargetError(FaasmlError):
    """A fitted loss curve does not reach the target loss: the target is at or below its floor."""

    def __init__(self, message: str, *, floor: float) -> None:
        super().__init__(message)
        self.floor = floor
