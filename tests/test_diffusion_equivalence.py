"""The DDPM UNet is the same function in every framework and mode (tests/equivalence.py).

Diffusion-specific: a 10-step DDIM sample and a 5-step DDPM (ancestral) sample from the
same numpy noise match the numpy float64 reference sampler (relative error <= 1e-3).
"""
from __future__ import annotations

import pytest

from tests.equivalence import Workload
from tests.helpers import impls, perturbed
from workloads import diffusion as D
from workloads.base import rel_err

CFG = D.preset("tiny").config
BATCH = D.preset("tiny").batch
PARAMS = perturbed(D.init_params(CFG, seed=0))
X0, T, NOISE = D.make_train_batch(CFG, BATCH, seed=3)
X_T = D.make_noise(CFG, (BATCH,), seed=4)
DDPM_STEPS = 5
DDPM_NOISE = D.make_noise(CFG, (DDPM_STEPS, BATCH), seed=5)
X_NOISY = D.q_sample(CFG.schedule, X0, T, NOISE).astype("float32")

W = Workload("diffusion", CFG, PARAMS, forward=("eps", (X_NOISY, T)), batch=(X0, T, NOISE),
             optimizer=D.OPTIMIZER, decayed=D.decayed, loss_drop=0.9,
             zero_grad=lambda k: ".attn" in k and k.endswith(".k.bias"),
             extras={"ddim": ("sample", (X_T,), {"method": "ddim", "steps": 10}),
                     "ddpm": ("sample", (X_T, DDPM_NOISE), {"method": "ddpm", "steps": DDPM_STEPS})})
IMPLS = impls()


@pytest.fixture(scope="module")
def ref() -> dict:
    return {"eps": D.reference_eps(CFG, PARAMS, X_NOISY, T),
            "loss": D.reference_loss(CFG, PARAMS, X0, T, NOISE),
            "ddim": D.reference_sample(CFG, PARAMS, X_T, None, "ddim", 10),
            "ddpm": D.reference_sample(CFG, PARAMS, X_T, DDPM_NOISE, "ddpm", DDPM_STEPS)}


@pytest.mark.parametrize("name,mode", IMPLS)
def test_export_round_trips_exactly(name, mode):
    W.check_export(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_eps_and_loss_match_reference(name, mode, ref):
    W.check_forward_and_loss(name, mode, ref["eps"], ref["loss"])


@pytest.mark.parametrize("name,mode", IMPLS)
def test_grads_match_baseline(name, mode):
    W.check_grads(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_adamw_steps_match_baseline(name, mode):
    W.check_steps(name, mode)


def test_baseline_adamw_matches_numpy_reference():
    W.check_baseline_adamw()


@pytest.mark.parametrize("name,mode", IMPLS)
def test_samples_follow_the_reference_trajectory(name, mode, ref):
    out = W.run(name, mode)
    for method in ("ddim", "ddpm"):
        assert out[method].shape == X_T.shape
        assert rel_err(out[method], ref[method]) <= 1e-3, method


@pytest.mark.parametrize("name,mode", IMPLS)
def test_loss_falls_on_one_batch(name, mode):
    W.check_loss_falls(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_mode_agrees_with_eager_of_same_framework(name, mode):
    W.check_agrees_with_eager(name, mode)
