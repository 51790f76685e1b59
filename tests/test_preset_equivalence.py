"""Equivalence at the presets that are timed (mode: MODE), O(1) weights, within the tolerances
of tests/support/equivalence.py: at `small` (both workloads) the forward output and loss against
numpy float64 and one AdamW step against numpy AdamW on the implementation's own gradients;
at `gpt2` and `ddpm-cifar` a forward at batch 1 (GPT-2: 64 tokens of its 1024-token block)."""
from __future__ import annotations

import pytest

from tests import test_diffusion_equivalence as TD
from tests import test_gpt_equivalence as TG
from tests.support.equivalence import Workload, tol
from tests.support.helpers import INSTALLED, o1_params
from workloads import diffusion as D
from workloads import gpt

_cache: dict = {}
# the mode each framework runs the presets in: its faster one on the CPU (JAX's eager mode
# dispatches every operation of the small UNet's backward one by one: minutes)
MODE = {"torch": "eager", "jax": "compiled", "tensorflow": "eager"}


def case(workload: str, preset: str) -> tuple[Workload, dict]:
    """The Workload of a preset and its numpy references, made once."""
    if (workload, preset) not in _cache:
        if workload == "gpt":
            cfg = gpt.preset(preset).config
            params = o1_params(gpt.init_params(cfg, seed=0))
            tokens, targets = gpt.make_batch(cfg, 2 if preset == "small" else 1, seed=3,
                                             seq_len=None if preset == "small" else 64)
            W = TG.workload(cfg, params, tokens, targets, tokens[:, :4])
            ref = {"forward": gpt.reference_logits(cfg, params, tokens),
                   "loss": gpt.reference_loss(cfg, params, tokens, targets)}
        else:
            cfg = D.preset(preset).config
            params = o1_params(D.init_params(cfg, seed=0))
            x0, t, noise = D.make_train_batch(cfg, 2 if preset == "small" else 1, seed=3)
            x = D.q_sample(cfg.schedule, x0, t, noise).astype("float32")
            W = TD.workload(cfg, params, (x0, t, noise), x, extras=False)
            ref = {"forward": D.reference_eps(cfg, params, x, t),
                   "loss": D.reference_loss(cfg, params, x0, t, noise)}
        _cache[(workload, preset)] = W, ref
    return _cache[(workload, preset)]


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
@pytest.mark.parametrize("name", INSTALLED)
def test_small_forward_loss_and_train_step(name, workload):
    W, ref = case(workload, "small")
    out = W.run(name, MODE[name], steps=1, extras=(), cache=False)
    assert W.forward_err(out, ref["forward"]) <= tol("forward", workload)
    assert W.loss_err(out, ref["loss"]) <= tol("loss", workload)
    err, key = W.adamw_err(out)
    assert err <= tol("adamw", workload), f"{key}: {err:.2e}"


@pytest.mark.parametrize("workload,preset", [("gpt", "gpt2"), ("diffusion", "ddpm-cifar")])
@pytest.mark.parametrize("name", INSTALLED)
def test_large_preset_forward_at_batch_1(name, workload, preset):
    W, ref = case(workload, preset)
    fw, m = W.build(name, MODE[name])
    method, inputs = W.forward
    out = fw.to_numpy(getattr(m, method)(*(fw.asarray(a, "cpu") for a in inputs)))
    assert W.forward_err({"forward": out}, ref["forward"]) <= tol("forward", workload)
