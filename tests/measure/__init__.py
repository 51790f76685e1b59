"""Measurement scripts, run by hand (`python -m tests.measure.<script>`): they print the achieved
errors the tolerances are set from and the side-by-side cookbook timings. Not collected as tests."""
