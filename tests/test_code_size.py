"""The code-size table (workloads/code_size.py, issue 40): what it counts, that a construct it
declares is really in the code, and that the committed table is the source's own count (a
counted file changed without `python -m workloads.code_size --write` fails here)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workloads import code_size as C

SRC = '''"""A module docstring
over two lines."""
import tensorflow as tf
from tensorflow import nn as tnn
import numpy as np


def f(x: tf.Tensor) -> tf.Tensor:
    """Its docstring."""
    # a comment
    y = tf.nn.gelu(x)          # a trailing comment

    z = tnn.silu(tf.reshape(y, (-1,)))
    return tf.function(lambda a: a, jit_compile=True)(z) + np.ones(1)
'''


def test_lines_are_code_lines_and_constructs_the_frameworks_api_names():
    lines = C.code_lines(SRC)
    # imports (3), def, y =, z =, return: docstrings, the comment line and the blank line are not code
    assert len(lines) == 7 and all("docstring" not in t and not t.strip().startswith("#") for t in lines.values())
    assert C.constructs(SRC, "tensorflow") == ["tensorflow.function", "tensorflow.nn.gelu", "tensorflow.nn.silu",
                                               "tensorflow.reshape"]        # tf.Tensor only annotates: not counted
    assert "jit_compile" in C.constructs(SRC, "tensorflow", keywords=True)
    assert C.constructs(SRC, "torch") == []


def test_the_committed_table_is_the_sources_count():
    assert C.load() == json.loads(json.dumps(C.measure())), \
        "a counted file changed: run python -m workloads.code_size --write and commit workloads/code_size.json"


def test_a_construct_the_code_does_not_use_is_one_clear_line(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(C.ROOT / "frameworks", root / "frameworks", ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "frameworks" / "tensorflow" / "dynamic.py"
    path.write_text(path.read_text().replace("reduce_retracing", "retrace_less"))
    with pytest.raises(SystemExit, match=r"STRATEGY_CONSTRUCTS names reduce_retracing for tensorflow "
                                         r"reduce_retracing, which the file does not use"):
        C.measure(Path(root))


def test_every_strategy_in_the_table_is_a_declared_dynamic_strategy():
    """The table's strategies are workloads.dynamic's (no name that no case carries)."""
    from workloads import dynamic as D
    declared = {s for m in ("eager", "graph", "compiled") for task in D.TASKS for s in D.strategies("any", m, task)}
    for fw, strategies in C.load()["strategies"].items():
        assert set(strategies) <= declared, (fw, set(strategies) - declared)
