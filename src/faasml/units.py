"""Parsing of money, durations and sizes given on the command line or in files."""

from __future__ import annotations

import math
import re

from faasml.exceptions import ConfigError

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_money(text: str | float, *, name: str = "budget") -> float:
    """'$2.50', '2.5' or 2.5 -> 2.5 US dollars; must be a positive finite number."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        cleaned = text.strip().lstrip("$").replace(",", "").strip()
        try:
            value = float(cleaned)
        except ValueError:
            raise ConfigError(
                f"the value of {name} is {text!r}, but must be an amount in US dollars "
                "such as 2.50 or $2.50"
            ) from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"the value of {name} is {text!r}, but must be a positive amount")
    return value


def parse_duration(text: str | float, *, name: str = "deadline") -> float:
    """'90s', '30m', '1h30m', '2.5h' or a number of seconds -> seconds (positive)."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        stripped = text.strip().replace(" ", "")
        pos, value, matched = 0, 0.0, False
        while pos < len(stripped):
            part = _DURATION_PART.match(stripped, pos)
            if part is None or part.end() == pos:
                matched = False
                break
            unit = (part.group(2) or "s").lower()
            value += float(part.group(1)) * _UNIT_SECONDS[unit]
            pos, matched = part.end(), True
        if not matched:
            raise ConfigError(
                f"the value of {name} is {text!r}, but must be a duration such as "
                "90s, 30m, 1h30m or a number of seconds"
            )
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"the value of {name} is {text!r}, but must be a positive duration")
    return value


def format_duration(seconds: float) -> str:
    """Seconds -> a short human form: '950 ms', '42.0 s', '12m 05s', '3h 02m'."""
    if not math.isfinite(seconds):
        return "inf"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        minutes, secs = divmod(round(seconds), 60)
        return f"{minutes}m {secs:02d}s"
    hours, rest = divmod(round(seconds), 3600)
    return f"{hours}h {rest // 60:02d}m"


def format_money(usd: float) -> str:
    """US dollars with precision that keeps small amounts readable; a negative amount as
    ``-$0.50``, and one that rounds to zero (a float sum's -1e-19) as ``$0.000000``."""
    amount = abs(usd)
    if amount >= 1:
        text = f"{amount:,.2f}"
    elif amount >= 0.01:
        text = f"{amount:.4f}"
    else:
        text = f"{amount:.6f}"
    negative = usd < 0 and float(text.replace(",", "")) != 0
    return f"{'-' if negative else ''}${text}"
