"""Running: `fwbench run`'s framework processes (runner), the pytest plugin each of them
loads (pytest_events, as `-p reports.running.pytest_events`), the signals that end a command
(signals) and writes that a reader never sees half of (atomic). Imports no framework, and
nothing here imports pandas: the plugin and the command line start quickly."""
