"""Each framework's primitives against numpy float64 (tests/support/primitives.py), and the sampler
coefficients against DDPM's Algorithm 2 and DDIM's eq. 12 written out step by step."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.equivalence import tol
from tests.support.helpers import INSTALLED
from tests.support.primitives import primitive_errors
from workloads import diffusion as D


@pytest.mark.parametrize("name", INSTALLED)
def test_primitives_match_numpy_float64(name):
    errs = primitive_errors(name)
    bad = {k: f"{e:.1e}" for k, e in errs.items() if not e <= tol(k, "primitive")}
    assert not bad, bad


@pytest.mark.parametrize("steps", [1, 4, 10])
def test_sampler_updates_are_algorithm_2_and_ddim(steps):
    """x_prev = a x + b eps + c z against the papers' formulas, one step at a time, float64."""
    s = D.Schedule()
    rng = np.random.default_rng(0)
    x, eps, z = rng.standard_normal((3, 5))
    ddpm, ddim = (D.sampler_coefficients(s, m, steps) for m in ("ddpm", "ddim"))
    tau = list(D.respaced_timesteps(s, steps))
    for i, t in enumerate(tau):                       # sampler step order: t descending
        j = steps - 1 - i
        abar = s.alphas_cumprod[t]
        abar_prev = s.alphas_cumprod[tau[i - 1]] if i > 0 else 1.0   # DDIM's final alpha is 1
        x0 = (x - np.sqrt(1 - abar) * eps) / np.sqrt(abar)
        want = np.sqrt(abar_prev) * x0 + np.sqrt(1 - abar_prev) * eps                 # eq. 12, eta 0
        got = ddim["a"][j] * x + ddim["b"][j] * eps + ddim["c"][j] * z
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        beta = 1 - abar / abar_prev
        sigma = np.sqrt(beta) if i > 0 else 0.0                                       # no noise at t = 0
        want = (x - beta / np.sqrt(1 - abar) * eps) / np.sqrt(1 - beta) + sigma * z   # Algorithm 2
        got = ddpm["a"][j] * x + ddpm["b"][j] * eps + ddpm["c"][j] * z
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        assert ddim["t"][j] == ddpm["t"][j] == t
