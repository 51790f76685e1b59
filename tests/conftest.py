"""fwbench's pytest hooks and options (see frameworks/pytest_plugin.py) and shared fixtures."""
from frameworks.pytest_plugin import *  # noqa: F401,F403  (hooks must live in the conftest namespace)
