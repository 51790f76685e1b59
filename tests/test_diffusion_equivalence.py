"""The DDPM UNet is the same function in every framework and mode (tests/support/equivalence.py).

Diffusion-specific: a 10-step DDIM sample and a 5-step DDPM (ancestral) sample from the
same numpy noise follow the numpy float64 reference sampler's trajectory.
"""
from __future__ import annotations

import pytest

from tests.support.equivalence import Workload, tol
from tests.support.helpers import impls, non_eager, o1_params
from workloads import diffusion as D
from workloads.base import rel_err

CFG = D.preset("tiny").config
BATCH = D.preset("tiny").batch
PARAMS = o1_params(D.init_params(CFG, seed=0))
X0, T, NOISE = D.make_train_batch(CFG, BATCH, seed=3)
X_T = D.make_noise(CFG, (BATCH,), seed=4)
DDPM_STEPS = 5
DDPM_NOISE = D.make_noise(CFG, (DDPM_STEPS, BATCH), seed=5)
X_NOISY = D.q_sample(CFG.schedule, X0, T, NOISE).astype("float32")


def block(name: str) -> str:
    """One finite-difference direction per UNet block (its parameters' common prefix)."""
    parts = name.split(".")
    return ".".join(parts[:3] if parts[0] in ("down", "up") else parts[:2] if parts[0] == "mid" else parts[:1])


def workload(cfg=CFG, params=PARAMS, batch=(X0, T, NOISE), x_noisy=X_NOISY, extras=True) -> Workload:
    return Workload("diffusion", cfg, params, forward=("eps", (x_noisy, batch[1])), batch=batch,
                    optimizer=D.OPTIMIZER, decayed=D.decayed, loss_drop=0.75,
                    ref_loss=lambda p: D.reference_loss(cfg, p, *batch),
                    zero_grad=lambda k: ".attn" in k and k.endswith(".k.bias"), group=block,
                    extras={"ddim": ("sample", (X_T,), {"method": "ddim", "steps": 10}),
                            "ddpm": ("sample", (X_T, DDPM_NOISE), {"method": "ddpm", "steps": DDPM_STEPS})}
                    if extras else {})


W = workload()
IMPLS = impls()


def reference_samples(cfg=CFG, params=PARAMS) -> dict:
    return {"ddim": D.reference_sample(cfg, params, X_T, None, "ddim", 10),
            "ddpm": D.reference_sample(cfg, params, X_T, DDPM_NOISE, "ddpm", DDPM_STEPS)}


@pytest.fixture(scope="module")
def ref() -> dict:
    return {"eps": D.reference_eps(CFG, PARAMS, X_NOISY, T),
            "loss": D.reference_loss(CFG, PARAMS, X0, T, NOISE), **reference_samples()}


@pytest.mark.parametrize("name,mode", IMPLS)
def test_export_round_trips_exactly(name, mode):
    W.check_export(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_eps_and_loss_match_reference(name, mode, ref):
    W.check_forward_and_loss(name, mode, ref["eps"], ref["loss"])


@pytest.mark.parametrize("name,mode", IMPLS)
def test_grads_match_finite_differences(name, mode):
    W.check_grads(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_adamw_steps_match_numpy_adamw_on_own_grads(name, mode):
    W.check_adamw(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_samples_follow_the_reference_trajectory(name, mode, ref):
    out = W.run(name, mode)
    for method in ("ddim", "ddpm"):
        assert out[method].shape == X_T.shape
        assert rel_err(out[method], ref[method]) <= tol("sample", "diffusion"), method


@pytest.mark.parametrize("name,mode", IMPLS)
def test_loss_falls_on_one_batch(name, mode):
    W.check_loss_falls(name, mode)


@pytest.mark.parametrize("name,mode", non_eager(IMPLS))
def test_mode_agrees_with_eager_of_same_framework(name, mode):
    W.check_agrees_with_eager(name, mode)
