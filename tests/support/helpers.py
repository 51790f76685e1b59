"""Shared test helpers: which (framework, mode) implementations are installed, and
parameters with non-trivial values everywhere (zero biases would hide bias bugs)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import frameworks

# The device the equivalence and bf16 tests build their models on: cpu, or cuda / gpu where
# the GPU check (.ci/gpu-check) runs them against the same float64 references.
DEVICE = os.environ.get("FWBENCH_TEST_DEVICE", "cpu")

_STATUS = frameworks.status()
INSTALLED = tuple(n for n, a in _STATUS.items() if not isinstance(a, str))
MISSING = {n: a for n, a in _STATUS.items() if isinstance(a, str)}


def impls() -> list:
    """pytest params for every installed (framework, mode), plus a skip per missing framework."""
    out = []
    for name in frameworks.names():
        a = _STATUS[name]
        if isinstance(a, str):
            out.append(pytest.param(name, "eager", id=f"{name}-missing", marks=pytest.mark.skip(reason=a)))
            continue
        for mode in a.modes:
            marks = [pytest.mark.slow] if mode == "compiled" else []
            out.append(pytest.param(name, mode, id=f"{name}-{mode}", marks=marks))
    return out


def baseline() -> tuple[str, str] | None:
    """The implementation others are compared against: the first installed eager one."""
    return (INSTALLED[0], "eager") if INSTALLED else None


def non_eager(params: list) -> list:
    """The compiled/graph modes of `impls()` (what a mode-vs-eager check compares)."""
    return [p for p in params if p.values[1] != "eager"]


def o1_params(params: dict[str, np.ndarray], gain: float = 2.0, seed: int = 1) -> dict[str, np.ndarray]:
    """Parameters whose activations are O(1): every weight of 2+ dims redrawn N(0, (gain /
    sqrt(fan_in))^2), fan_in = the product of all but the last axis (Conv1D/Dense (in, out),
    conv HWIO), except embeddings (`.wte`/`.wpe`, (rows, C)), drawn N(0, 1/C) so that the
    first LayerNorm sees a small variance; 1-D ones perturbed (see `perturbed`). With
    GPT-2's init (std 0.02) GELU stays near its linear range and softmax near uniform."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in params.items():
        if v.ndim >= 2:
            fan_in = v.shape[1] if k.startswith(("wte", "wpe")) else int(np.prod(v.shape[:-1]))
            std = (1.0 if k.startswith(("wte", "wpe")) else gain) / np.sqrt(fan_in)
            v = rng.normal(0.0, std, v.shape)
        out[k] = v.astype(np.float32)
    return perturbed(out, seed=seed + 1)


def perturbed(params: dict[str, np.ndarray], seed: int = 1, scale: float = 0.05) -> dict[str, np.ndarray]:
    """Add seeded noise to every 1-D parameter (biases, norm weights) so they are not 0 / 1."""
    rng = np.random.default_rng(seed)
    return {k: (v + scale * rng.standard_normal(v.shape)).astype(np.float32) if v.ndim == 1 else v
            for k, v in params.items()}


def grad_cosines(grads: dict, ref: dict, skip=lambda k: False) -> dict[str, float]:
    """Per tensor of `ref` (those `skip` does not name), the cosine between the gradient and
    the reference, in float64: the bf16 tests' gradient measure."""
    out = {}
    for k, r in ref.items():
        if skip(k):
            continue
        a, b = np.asarray(grads[k], np.float64).ravel(), np.asarray(r, np.float64).ravel()
        out[k] = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    return out
