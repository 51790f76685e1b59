"""Analysis: result files -> validated tidy frame (data, validate) -> one row per case over
its processes (replicates) -> intervals and verdicts under one error rate (stats, verdicts)
-> findings, the framework-choice ranking and the Summary's sentences (findings, summary);
`fwbench compare` (compare) and the variance components of a run (variance). Draws nothing
and writes no document."""
