"""Fairness as a number: how fwbench's implementations compare with the ones a user of each
framework would pick instead (Hugging Face transformers' GPT-2, diffusers' UNet2DModel), from the
latest peers table for the run's device kind (reports/data/peers.json, written by
`python -m frameworks.peers --record`; docs/design/peers.md). The table is measured apart from
the run (same weights and inputs, outputs compared, interleaved rounds); the report names it,
its machine and date, so a reader sees which ratio the comparisons between frameworks carry."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from workloads.base import is_accelerator

TABLE = Path(__file__).resolve().parents[1] / "data" / "peers.json"


def latest(device: str, path: Path = TABLE) -> dict[str, Any] | None:
    """The recorded table for `device` ('cpu', 'cuda'): {"machine": ..., "rows": [...]}, or None."""
    try:
        tables = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return tables.get("cuda" if is_accelerator(device) else device)


def per_framework(table: dict[str, Any], frameworks: list[str]) -> pd.DataFrame:
    """One row per framework of the run: its pairs timed, the range of their median ratios
    fwbench/peer, the pair furthest above 1 with its 95% interval, and the pairs not timed
    (no peer, not run, outputs differ) with their count."""
    rows = []
    for fw in frameworks:
        mine = [r for r in table["rows"] if r.get("framework") == fw]
        ok = [r for r in mine if r.get("status") == "ok"]
        if not mine:
            continue
        worst = max(ok, key=lambda r: r["ratio"], default=None)
        rows.append({
            "framework": fw,
            "pairs timed": f"{len(ok)} of {len(mine)}",
            "ratio fwbench/peer": f"{min(r['ratio'] for r in ok):.2f}-{max(r['ratio'] for r in ok):.2f}" if ok else "",
            "highest": (f"{worst['ratio']:.3f} [{worst['low']:.3f}, {worst['high']:.3f}] ({worst['workload']} "
                        f"{worst['task']}, {worst['mode']})") if worst else "",
            "not timed": "; ".join(sorted({f"{r['workload']} {r['task']}: {r['status']}"
                                           for r in mine if r.get("status") != "ok"})),
        })
    return pd.DataFrame(rows)


def sentence(table: dict[str, Any]) -> str:
    """Where and when the table was measured, and what its ratio means."""
    m = table["machine"]
    presets = ", ".join(f"{k} {v}" for k, v in m.get("presets", {}).items())
    return (f"fwbench's implementations against the ones a user of each framework would pick instead (Hugging Face "
            f"transformers' GPT-2 in PyTorch, Flax and TensorFlow, diffusers' UNet2DModel), the same weights and "
            f"inputs, outputs compared before timing, {m.get('rounds')} interleaved rounds per pair: measured apart "
            f"from this run on {m.get('cpu')} ({m.get('threads')} threads, {presets}, {m.get('precision')}) on "
            f"{m.get('date')} at commit {m.get('commit')} (`python -m frameworks.peers`). A ratio above 1 is a "
            "handicap the framework's numbers in this report carry.")
