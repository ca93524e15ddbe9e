"""The billing meter: every invocation and store request priced with the plan's catalog.

Function time: billed duration × memory/1024 × price per GB-second, plus the price per
invocation (CE-scaling eqs. 4–5, AWS Lambda semantics: failed and cancelled invocations are
billed too). Store requests: the puts and gets a worker counted (``Store.stats``), priced with
the storage service's request prices; a time-priced service (a parameter-server VM) is billed
per second it runs. Entries keep their time, so the run report can plot spend over time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from faasml.catalog import Catalog, StorageService
from faasml.exceptions import InfeasibleConstraintError
from faasml.models.cost import request_price
from faasml.runtime.platforms.contract import Billed
from faasml.units import format_money


@dataclass(frozen=True)
class Charge:
    """One billed item."""

    t_s: float
    """Seconds since the run started."""
    kind: str
    """'function', 'invocation', 'storage', 'server', 'cache' or 'profiling'."""
    usd: float
    trial: int = -1
    detail: str = ""


def prewarm_detail(memory_mb: int) -> str:
    """The detail of a prewarmed function's charge (its start, billed on its own)."""
    return f"prewarm {memory_mb} MB"


class Meter:
    """Accumulates charges; thread-safe; totals by kind."""

    def __init__(self, catalog: Catalog, charges: list[Charge] | None = None) -> None:
        self.catalog = catalog
        self.platform = catalog.platform
        self._lock = threading.Lock()
        self.charges: list[Charge] = list(charges or [])

    def function_usd(self, billed: Billed) -> float:
        """duration × GB × price per GB-s (CE-scaling eq. 4, n·t·m·p_f for one function)."""
        return billed.duration_s * billed.memory_mb / 1024.0 * self.platform.price_per_gb_s

    def invocation(self, billed: Billed, t_s: float, trial: int = -1) -> float:
        """Charge one invocation; returns its price."""
        gb_s = self.function_usd(billed)
        request = self.platform.price_per_invocation
        with self._lock:
            self.charges.append(Charge(t_s, "function", gb_s, trial, f"{billed.memory_mb} MB"))
            self.charges.append(Charge(t_s, "invocation", request, trial))
        return gb_s + request

    def standalone(self, billed: Billed, t_s: float) -> float:
        """Charge a cold start not tied to an invocation (a prewarmed instance)."""
        usd = self.function_usd(billed)
        with self._lock:
            self.charges.append(Charge(t_s, "function", usd, -1, prewarm_detail(billed.memory_mb)))
        return usd

    def prewarm_usd(self, memory_mb: int, since: int = 0) -> float:
        """Dollars charged for starting prewarmed functions of ``memory_mb``, in the charges
        from index ``since`` on."""
        detail = prewarm_detail(memory_mb)
        with self._lock:
            return sum(c.usd for c in self.charges[since:] if c.detail == detail)

    def profiling(self, billed: Billed, t_s: float) -> float:
        """Charge one invocation of the job's probe (duration × GB × price + request), kept
        apart as 'profiling' so the bill shows what measuring the job cost."""
        usd = self.function_usd(billed) + self.platform.price_per_invocation
        with self._lock:
            self.charges.append(Charge(t_s, "profiling", usd, -1, f"{billed.memory_mb} MB"))
        return usd

    def requests(
        self, service: StorageService, stats: dict[str, int], t_s: float, trial: int = -1
    ) -> float:
        """Charge the puts and gets counted by a store client of ``service``."""
        if service.pricing != "request":
            return 0.0
        puts, gets = stats.get("puts", 0), stats.get("gets", 0)
        put_mb = stats.get("bytes_written", 0) / 1e6 / max(1, puts)
        get_mb = stats.get("bytes_read", 0) / 1e6 / max(1, gets)
        usd = float(
            puts * request_price(service.put_usd, service.put_unit_kb, put_mb)
            + gets * request_price(service.get_usd, service.get_unit_kb, get_mb)
        )
        if usd:
            with self._lock:
                self.charges.append(Charge(t_s, "storage", usd, trial, service.name))
        return usd

    def server(self, service: StorageService, seconds: float, t_s: float) -> float:
        """Charge a time-priced service for ``seconds`` of running."""
        usd = seconds / 3600.0 * service.hourly_usd
        with self._lock:
            self.charges.append(Charge(t_s, "server", usd, -1, service.name))
        return usd

    def cache(self, name: str, bill: dict[str, float], t_s: float) -> float:
        """Charge a function-priced cache (InfiniCache) its nodes' real bill: GB-seconds and
        invocations, keep-alives included, as one 'cache' item."""
        from faasml.sync.stores.infinicache.runs import bill_usd

        usd = bill_usd(bill, self.platform)
        detail = f"{name}: {bill['invocations']:.0f} invocations, {bill['gb_s']:.3f} GB-s"
        with self._lock:
            self.charges.append(Charge(t_s, "cache", usd, -1, detail))
        return usd

    @property
    def total_usd(self) -> float:
        with self._lock:
            return sum(charge.usd for charge in self.charges)

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        with self._lock:
            for charge in self.charges:
                out[charge.kind] = out.get(charge.kind, 0.0) + charge.usd
        return out

    def snapshot(self) -> list[Charge]:
        """The charges so far (a copy: the run's record keeps them)."""
        with self._lock:
            return list(self.charges)

    def to_list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(vars(charge)) for charge in self.charges]  # flat: asdict's copy

    @staticmethod
    def from_list(catalog: Catalog, items: list[dict[str, Any]]) -> Meter:
        return Meter(catalog, [Charge(**item) for item in items])


def refused_after_profiling(
    err: InfeasibleConstraintError, budget_usd: float | None, profiling_usd: float
) -> InfeasibleConstraintError:
    """The planner's refusal ``err`` of the budget measuring the job left, saying what the
    measuring cost and the least budget for the run and the measuring together."""
    least = err.least_budget_usd
    if budget_usd is None or least is None or profiling_usd <= 0:
        return err
    refused = str(err).split("; the least budget")[0]
    return InfeasibleConstraintError(
        f"{refused}: profiling cost {format_money(profiling_usd)} of your "
        f"{format_money(budget_usd)} budget; the least budget that works for the run after "
        f"profiling is {format_money(least)} (total {format_money(profiling_usd + least)})",
        least_budget_usd=profiling_usd + least,
    )
