"""Measures: result files -> a validated tidy frame (data, validate); intervals, tests and
verdicts under one error rate (stats, verdicts); the numbers the sections judge (precision,
scaleout, distributed, peers, controls, bullets). Reads no section and draws nothing."""
