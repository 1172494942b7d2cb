"""Cost per token: what the server costs an hour, over the tokens it made in an hour at the rate
measured. A run at the operating point gives the cost a user pays there; a run at a higher load than
the server sustains gives a cost no user can have, so the capacity report quotes the operating point.
"""

from __future__ import annotations

MILLION = 1_000_000


def per_million_tokens(price_per_hour: float | None, tokens_per_second: float | None) -> float | None:
    """$ per million tokens at `tokens_per_second`; None without a price or without tokens."""
    if price_per_hour is None or not tokens_per_second:
        return None
    return price_per_hour / 3600 / tokens_per_second * MILLION
