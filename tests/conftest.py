"""fwbench's pytest hooks and options (see frameworks/pytest_plugin.py) and shared fixtures."""
import os

from frameworks.pytest_plugin import *  # noqa: F401,F403  (hooks must live in the conftest namespace)

# Reports rendered by tests write paper.tex but do not compile it (seconds each); the paper
# tests compile it on purpose (tests/test_paper.py).
os.environ.setdefault("FWBENCH_PDF", "0")
