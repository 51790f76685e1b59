"""The equivalence checks catch a wrong model: break one detail at a time in one framework
(patching the module-level name its model reads) and assert that at least one check of
tests/support/equivalence.py or tests/support/primitives.py fails, every reference being numpy float64 or
finite differences, never the mutated code. Eager mode; tiny presets with O(1) weights."""
from __future__ import annotations

import dataclasses
import importlib

import pytest

from tests import test_diffusion_equivalence as TD
from tests import test_gpt_equivalence as TG
from tests.support.equivalence import tol
from tests.support.helpers import INSTALLED
from tests.support.primitives import primitive_errors
from workloads import diffusion as D
from workloads import gpt
from workloads.base import rel_err


def erf_gelu(name: str):
    if name == "torch":
        from torch.nn import functional as F
        return lambda x: F.gelu(x)
    if name == "jax":
        import jax
        return lambda x: jax.nn.gelu(x, approximate=False)
    import tensorflow as tf
    return lambda x: tf.nn.gelu(x, approximate=False)


def ddim_final_alpha_not_one(module):
    """DDIM whose last step uses alpha-bar_0 instead of 1 (no final x0 prediction)."""
    orig = module.sampler_coefficients

    def coefficients(sched, method, steps):
        c = {k: v.copy() for k, v in orig(sched, method, steps).items()}
        if method == "ddim":
            c["a"][-1], c["b"][-1] = 1.0, 0.0
        return c
    return coefficients


# mutation -> (module suffix, attribute, value factory (framework name, module) -> value)
GPT_MUTATIONS = {
    "gelu_erf": ("gpt", "gelu", lambda n, m: erf_gelu(n)),
    "ln_eps_1e-6": ("gpt", "LN_EPS", lambda n, m: 1e-6),
    "decay_all_tensors": ("gpt", "decayed", lambda n, m: lambda k, s: True),
    "decay_no_tensor": ("gpt", "decayed", lambda n, m: lambda k, s: False),
    "clip_0.5": ("gpt", "OPTIMIZER", lambda n, m: dataclasses.replace(m.OPTIMIZER, clip_norm=0.5)),
    "adam_eps_1e-6": ("gpt", "OPTIMIZER", lambda n, m: dataclasses.replace(m.OPTIMIZER, eps=1e-6)),
    "attn_scale_1/hs": ("gpt", "attn_scale", lambda n, m: lambda hs: 1.0 / hs),
}
DIFFUSION_MUTATIONS = {
    "gn_eps_1e-5": ("diffusion", "GN_EPS", lambda n, m: 1e-5),
    "clip_0.5": ("diffusion", "OPTIMIZER", lambda n, m: dataclasses.replace(m.OPTIMIZER, clip_norm=0.5)),
    "adam_eps_1e-6": ("diffusion", "OPTIMIZER", lambda n, m: dataclasses.replace(m.OPTIMIZER, eps=1e-6)),
    "attn_scale_1/C": ("diffusion", "attn_scale", lambda n, m: lambda c: 1.0 / c),
    "ddim_final_alpha": ("diffusion", "sampler_coefficients", lambda n, m: ddim_final_alpha_not_one(m)),
}


def jax_ln_vjp_without_xhat_term(name, module):
    """JAX's written LayerNorm backward (gpt.Forms.norm_vjp) without its xhat * mean(g w xhat) term."""
    import jax

    @jax.custom_vjp
    def ln(x, w, b):
        return module._layer_norm_fwd(x, w, b)[0]

    def bwd(res, g):
        xhat, rstd, w = res
        gw = g * w
        return rstd * (gw - gw.mean(-1, keepdims=True)), (g * xhat).sum(0), g.sum(0)
    ln.defvjp(module._layer_norm_fwd, bwd)
    return ln


def jax_rows_gemm_mean_weight_grad(name, module):
    """JAX's canonical weight-gradient product (precision.rows_gemm) averaging over the rows
    instead of summing."""
    import jax
    from jax import lax

    @jax.custom_vjp
    def gemm(a, b, transpose_b):
        return a @ b.T if transpose_b else a @ b

    def fwd(a, b, transpose_b):
        return gemm(a, b, transpose_b), (a, b, transpose_b)

    def bwd(res, g):
        a, b, transpose_b = res
        n = a.shape[0]
        if transpose_b:
            return g @ b, lax.optimization_barrier(g.T) @ a / n, None
        return g @ b.T, lax.optimization_barrier(a.T) @ g / n, None
    gemm.defvjp(fwd, bwd)
    return lambda a, b, transpose_b: gemm(a, b, transpose_b)


# JAX's gradient programs on the CPU write two backward passes by hand (frameworks/jax/gpt.py:
# Forms): a wrong one must fail the gradient checks too.
FORM_MUTATIONS = {
    "ln_vjp_without_xhat_term": ("gpt", "layer_norm_vjp", jax_ln_vjp_without_xhat_term),
    "weight_grad_mean_not_sum": ("precision", "rows_gemm", jax_rows_gemm_mean_weight_grad),
}
_refs: dict[str, dict] = {}


def references(workload: str) -> dict:
    if workload not in _refs:
        if workload == "gpt":
            _refs[workload] = {"forward": gpt.reference_logits(TG.CFG, TG.PARAMS, TG.TOKENS),
                               "loss": gpt.reference_loss(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS)}
        else:
            _refs[workload] = {"forward": D.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T),
                               "loss": D.reference_loss(TD.CFG, TD.PARAMS, TD.X0, TD.T, TD.NOISE),
                               "ddim": D.reference_sample(TD.CFG, TD.PARAMS, TD.X_T, None, "ddim", 10)}
    return _refs[workload]


def failing_checks(workload: str, name: str) -> dict[str, float]:
    """Run every check (3 optimizer steps, the DDIM sample) on a fresh eager model of the
    current (possibly patched) code; return the checks whose error exceeds the tolerance."""
    W, ref = (TG.W, references("gpt")) if workload == "gpt" else (TD.W, references("diffusion"))
    out = W.run(name, "eager", steps=3, extras=("ddim",) if workload == "diffusion" else (), cache=False)
    errs = {"forward": W.forward_err(out, ref["forward"]), "loss": W.loss_err(out, ref["loss"]),
            "grad_fd": W.grad_fd_err(out["grads"])[0], "adamw": W.adamw_err(out)[0]}
    if workload == "diffusion":
        errs["sample"] = rel_err(out["ddim"], ref["ddim"])
    failed = {k: e for k, e in errs.items() if not e <= tol(k, workload)}
    failed.update({f"primitive:{k}": e for k, e in primitive_errors(name).items() if not e <= tol(k, "primitive")})
    return failed


CASES = [pytest.param("gpt", m, n, id=f"gpt-{m}-{n}") for m in GPT_MUTATIONS for n in INSTALLED] + \
        [pytest.param("diffusion", m, n, id=f"diffusion-{m}-{n}") for m in DIFFUSION_MUTATIONS for n in INSTALLED] + \
        [pytest.param("gpt", m, "jax", id=f"gpt-{m}-jax") for m in FORM_MUTATIONS if "jax" in INSTALLED]


@pytest.mark.parametrize("workload,mutation,name", CASES)
def test_mutation_is_caught(workload, mutation, name, monkeypatch):
    table = FORM_MUTATIONS if mutation in FORM_MUTATIONS else GPT_MUTATIONS if workload == "gpt" else \
        DIFFUSION_MUTATIONS
    suffix, attr, value = table[mutation]
    module = importlib.import_module(f"frameworks.{name}.{suffix}")
    monkeypatch.setattr(module, attr, value(name, module))
    failed = failing_checks(workload, name)
    print(f"\nMUTATION {workload} {mutation} {name}: caught by "
          + (", ".join(f"{k} ({e:.1e})" for k, e in failed.items()) or "NOTHING"))
    assert failed, f"{mutation} in {name} passes every equivalence check"


@pytest.mark.parametrize("name", INSTALLED)
def test_unmutated_code_passes_the_same_checks(name):
    assert failing_checks("gpt", name) == {}
    assert failing_checks("diffusion", name) == {}
