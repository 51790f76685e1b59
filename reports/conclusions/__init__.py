"""Conclusions, read from the measures and every section's judging half: one row per case over
its processes (replicates), findings and the framework-choice ranking (findings, jobs), the
claims table (claims), the Summary's sentences (summary, narrative), `fwbench compare`
(compare) and a run's variance components (variance). Draws nothing and writes no document."""
