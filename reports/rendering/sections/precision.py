"""The precision section's drawing half (its judging half: reports.sections.precision): the
policy in words, bf16 over fp32 per framework and mode, and per case."""
from __future__ import annotations

import pandas as pd

from reports.measures import precision, stats
from reports.rendering.sections.common import Block, Drawing


def blocks(df: pd.DataFrame, fam: stats.Family) -> list[Block]:
    """bf16 against fp32 where a run has both (reports.measures.precision)."""
    t = precision.table(df, fam)
    if t.empty:
        return []
    native = precision.native(df)
    cpu = ("the CPU multiplies bf16 natively (AVX512-BF16 or AMX-BF16), so the ratios are findings"
           if native else precision.why_silent(df))
    return [("h", 2, "Precision: bf16 against fp32"),
            ("p", "bf16 is one explicit policy in every framework (workloads/precision.py): parameters, gradients "
                  "and optimizer state in fp32, no loss scaling; the inputs of every matrix product and convolution "
                  "in bf16, their results back to fp32; norms, softmax (the attention's included, written out "
                  "where a fused attention would run it in bf16), activations and the loss in fp32. Each case's "
                  "bf16 time is over the same case's fp32 time, paired over the processes that ran both; here "
                  f"{cpu}. bf16 cases stay out of the framework comparisons and the choice, which read fp32."),
            ("table", t, "bf16 over fp32 step time per framework and mode: geometric mean over the tasks "
                         "[interval at the verdict's level] and the verdict (below 1: bf16 faster).", "precision"),
            ("table", precision.per_task(df), "bf16 and fp32 step time of every case that ran both.",
             "precision-tasks")]


DRAWING = Drawing(name="precision", blocks=blocks)
