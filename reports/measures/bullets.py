"""The Summary's bullets: each at most 40 words (tests/test_summary_bullets.py), a reader's one glance;
the figures that do not fit go to the table right under the bullets (details_table), so no
figure is lost and none changes.

A Finding is a str (every caller that joins or prints sentences keeps working) that also
carries its table rows: (finding, where, figures), where `finding` names the bullet the row
belongs to and `where` the task, stream or framework the figures are of.
"""
from __future__ import annotations

from typing import Iterable

import pandas as pd

COLUMNS = ("finding", "where", "figures")


class Finding(str):
    rows: tuple[tuple[str, str, str], ...] = ()

    def __new__(cls, text: str, topic: str = "", rows: Iterable[tuple[str, str]] = ()) -> Finding:
        f = super().__new__(cls, text)
        f.rows = tuple((topic, str(w), str(x)) for w, x in rows)
        return f


def tally(items: Iterable[str]) -> list[tuple[str, int]]:
    """Each distinct item with its count, the most frequent first and ties in the order the
    items first appear: a sentence's "torch's in 4, jax's in 1, ..." reads the same in every
    process (a set's order follows Python's per-process string hashing)."""
    items = list(items)
    return sorted(((x, items.count(x)) for x in dict.fromkeys(items)), key=lambda xn: -xn[1])


def details_table(bullets: Iterable[str]) -> pd.DataFrame:
    """The rows the bullets left to the table, in the bullets' order; a bullet's name is
    written on its first row only."""
    rows = [(topic if i == 0 else "", w, x) for b in bullets for i, (topic, w, x) in enumerate(getattr(b, "rows", ()))]
    return pd.DataFrame(rows, columns=list(COLUMNS))
