"""Money as reports and the console print it: a float sum's negative zero is ``$0.000000``."""

from __future__ import annotations

import pytest

from faasml.units import format_money


@pytest.mark.parametrize(
    ("usd", "text"),
    [
        (-1e-19, "$0.000000"),  # charges summed and subtracted: never "$-0.000000"
        (-0.0, "$0.000000"),
        (-4e-7, "$0.000000"),
        (0.0, "$0.000000"),
        (3.2e-5, "$0.000032"),
        (0.05, "$0.0500"),
        (-0.5, "-$0.5000"),
        (1234.5, "$1,234.50"),
        (-1234.5, "-$1,234.50"),
    ],
)
def test_format_money(usd: float, text: str) -> None:
    assert format_money(usd) == text
