"""The Summary's bullets are a reader's one glance: each at most MAX_WORDS words (they once ran
to 46-96, every figure of a finding in one sentence); the figures that do not fit are in the
table right under the bullets. Read from the committed examples rendered from their JSON as
`fwbench report` does (tests/support/shared.py: once per test run), so the check reads the
report a reader gets."""
from __future__ import annotations

import re

import pytest

from tests.support.shared import has_example, rendered_example

MAX_WORDS = 40


def words(markdown: str) -> int:
    """Words of one line of Markdown as a reader sees them: links keep their text, emphasis,
    code marks and HTML tags go, then whitespace splits (an interval "[1.20, 1.94]" is two; a
    token with no letter or digit, such as a dash, is no word)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[*`]", " ", text)      # emphasis and code marks; per_sample_grad is one word
    return len([w for w in text.split() if re.search(r"\w", w)])


def summary_bullets(md: str) -> list[str]:
    section = md.split("\n## Summary\n", 1)[1].split("\n## ", 1)[0]
    return [ln[2:] for ln in section.splitlines() if ln.startswith("- ")]


def test_words_count_what_a_reader_reads():
    assert words("- **torch** compiled [12.6 ms](x.md) <wbr>over `jax`: 1.53x [1.20, 1.94] - yes") == 10
    assert words("per_sample_grad_mlp_b64: torch 495 us") == 4


@pytest.mark.parametrize("example", ["cpu-2core", "cpu-2core-axes"])
def test_every_summary_bullet_has_at_most_forty_words(example):
    if not has_example(example):
        pytest.skip(f"no committed example {example}")
    out, _ = rendered_example(example)
    md = (out / "report.md").read_text()
    bullets = summary_bullets(md)
    assert len(bullets) >= 3, md[:2000]
    counts = {b[:60]: words(b) for b in bullets}
    assert max(counts.values()) <= MAX_WORDS, counts


def test_a_tally_reads_the_same_in_every_process():
    """Counts in a bullet ("torch's in 4, jax's in 1, tensorflow's in 1"): most first, ties in
    the order of first appearance, whatever PYTHONHASHSEED the process drew (a set's order
    made the committed example's report differ between two renders)."""
    import os
    import subprocess
    import sys

    from reports.measures.bullets import tally
    assert tally(["torch", "jax", "torch", "tensorflow", "torch", "torch"]) == [("torch", 4), ("jax", 1),
                                                                                 ("tensorflow", 1)]
    code = "from reports.measures.bullets import tally; print(tally(['jax', 'tensorflow', 'torch', 'b', 'a']))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(6)}
    assert len(outs) == 1 and "('jax', 1), ('tensorflow', 1), ('torch', 1)" in outs.pop()
