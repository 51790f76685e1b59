"""JAX's bf16 policy (workloads/precision.py) for the GPT and the DDPM UNet, tested twice.

1. A probe of the dtypes the programs actually run: jax.make_jaxpr of the forward, the loss,
   the gradient and the training step (and generation / sampling), every sub-program walked
   (pjit, custom_jvp / custom_vjp, scan / while bodies). At bf16 every dot_general and
   conv_general_dilated takes bf16 operands and returns float32, and nothing else computes in
   bf16 (bf16 values may only be cast, moved or reshaped on their way into a product): the
   norms, the softmax (reduce_max, exp, reduce_sum), GELU/SiLU, the loss and the optax update
   are float32. The fp32 programs hold no bf16 at all. A wrong program fails the probe.
2. Equivalence against the float64 references of the fp32 tests, at tolerances measured for
   bf16 (docs/measurements/bf16-jax.txt; `python -m tests.test_bf16_jax` measures them):
   the forward and the loss, per-tensor cosine similarity of the gradients (GPT: against the
   float64 backpropagation of tests/equivalence.py; UNet: against the fp32 path run in
   float64 under jax.enable_x64, and the float64 directional derivatives), the samplers'
   trajectories, and 50 training steps of the tiny GPT against the same steps at fp32.
"""
from __future__ import annotations

import importlib
from collections import Counter
from functools import partial
from typing import Any, Iterator

import numpy as np
import pytest

from tests.helpers import DEVICE, INSTALLED, grad_cosines

if "jax" not in INSTALLED:
    pytest.skip("needs jax", allow_module_level=True)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import frameworks  # noqa: E402
from frameworks.jax import diffusion as JD  # noqa: E402
from frameworks.jax import gpt as JG  # noqa: E402
from tests import equivalence as E  # noqa: E402
from tests import test_diffusion_equivalence as TD  # noqa: E402
from tests import test_gpt_equivalence as TG  # noqa: E402
from workloads import diffusion as D  # noqa: E402
from workloads import gpt  # noqa: E402
from workloads.base import rel_err  # noqa: E402
from workloads.case import Case, Placement  # noqa: E402

BF16, F32 = jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32)
PRODUCTS = {"dot_general", "conv_general_dilated"}
# What bf16 values may pass through on their way into a product: casts and data movement.
MOVES = {"convert_element_type", "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims",
         "slice", "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "rev", "copy", "copy_p",
         "pjit", "jit", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "scan", "while",
         "cond", "closed_call", "remat", "checkpoint"}
MODES = [pytest.param("eager", id="eager"), pytest.param("compiled", id="compiled", marks=pytest.mark.slow)]


# ----------------------------------------------------------------------------- the probe

def _sub_jaxprs(value: Any) -> Iterator[Any]:
    if hasattr(value, "eqns"):                       # a Jaxpr
        yield value
    elif hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):  # a ClosedJaxpr
        yield value.jaxpr
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _sub_jaxprs(v)


def equations(jaxpr: Any) -> Iterator[Any]:
    """Every equation of a (closed) jaxpr and of every program inside it, depth first."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in _sub_jaxprs(value):
                yield from equations(sub)


def _dtypes(atoms: list) -> list:
    return [a.aval.dtype for a in atoms if hasattr(a.aval, "dtype")]


def violations(jaxpr: Any, precision: str) -> list[str]:
    """What in a program breaks the policy `precision` (empty: it keeps it).
    fp32: no bf16 value anywhere. bf16: every product bf16 x bf16 -> float32, and no other
    operation but casts and data movement touches a bf16 value."""
    out = []
    for e in equations(jaxpr):
        name, ins, outs = e.primitive.name, _dtypes(e.invars), _dtypes(e.outvars)
        where = f"{name} {[str(d) for d in ins]} -> {[str(d) for d in outs]}"
        if precision == "fp32":
            if BF16 in ins + outs:
                out.append("bf16 in an fp32 program: " + where)
        elif name in PRODUCTS:
            if any(d != BF16 for d in ins) or outs != [F32]:
                out.append("a product not bf16 x bf16 -> float32: " + where)
        elif name not in MOVES and BF16 in ins + outs:
            out.append("computes in bf16: " + where)
    return out


def census(jaxpr: Any) -> Counter:
    """(primitive, dtype of its first output) -> how many, over every sub-program."""
    return Counter((e.primitive.name, str(_dtypes(e.outvars)[0]) if _dtypes(e.outvars) else "")
                   for e in equations(jaxpr))


def _arrays(tree: Any) -> Any:
    return jax.tree.map(jnp.asarray, tree)


def gpt_programs(precision: str) -> dict[str, Any]:
    """The GPT's programs at `precision`, as frameworks/jax/gpt.py's JaxGPT composes them."""
    cfg, p = TG.CFG, _arrays(TG.PARAMS)
    tok, tgt, prompt = jnp.asarray(TG.TOKENS), jnp.asarray(TG.TARGETS), jnp.asarray(TG.PROMPT)
    tx = JG.adamw(TG.PARAMS, gpt.OPTIMIZER, gpt.decayed)
    loss = partial(JG.loss, cfg=cfg, precision=precision)
    mk = jax.make_jaxpr
    return {"forward": mk(partial(JG.logits, cfg=cfg, precision=precision))(p, tok),
            "loss": mk(loss)(p, tok, tgt),
            "grads": mk(jax.grad(loss))(p, tok, tgt),
            "train_step": mk(partial(JG.train_step, cfg=cfg, tx=tx, precision=precision))(p, tx.init(p), tok, tgt),
            "generate": mk(partial(JG.generate_cached, cfg=cfg, loop=jax.lax.fori_loop, n_new=4,
                                   precision=precision))(p, prompt)}


def unet_programs(precision: str) -> dict[str, Any]:
    """The UNet's programs at `precision`, as frameworks/jax/diffusion.py's JaxDiffusion composes them."""
    cfg, p = TD.CFG, _arrays(TD.PARAMS)
    x0, t, noise = jnp.asarray(TD.X0), jnp.asarray(TD.T), jnp.asarray(TD.NOISE)
    sch = cfg.schedule
    sched = {k: jnp.asarray(getattr(sch, k).astype(np.float32))
             for k in ("sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod")}
    tx = JD.adamw(TD.PARAMS, D.OPTIMIZER, D.decayed)
    loss = partial(JD.loss, cfg=cfg, sched=sched, precision=precision)
    c = D.sampler_coefficients(sch, "ddim", 3)
    coefs = {"t": jnp.asarray(c["t"].astype(np.int32)), **{k: jnp.asarray(c[k].astype(np.float32)) for k in "abc"}}
    mk = jax.make_jaxpr
    return {"forward": mk(partial(JD.eps, cfg=cfg, precision=precision))(p, jnp.asarray(TD.X_NOISY), t),
            "loss": mk(loss)(p, x0, t, noise),
            "grads": mk(jax.grad(loss))(p, x0, t, noise),
            "train_step": mk(partial(JD.train_step, cfg=cfg, sched=sched, tx=tx, precision=precision))(
                p, tx.init(p), x0, t, noise),
            "sample": mk(partial(JD.sample_loop, cfg=cfg, scan=jax.lax.scan, precision=precision))(
                p, jnp.asarray(TD.X_T), coefs, None)}


PROGRAMS: dict[tuple[str, str], dict[str, Any]] = {}


def programs(workload: str, precision: str) -> dict[str, Any]:
    if (workload, precision) not in PROGRAMS:
        PROGRAMS[(workload, precision)] = (gpt_programs if workload == "gpt" else unet_programs)(precision)
    return PROGRAMS[(workload, precision)]


def gpt_products(cfg: gpt.GPTConfig) -> int:
    """Products of the GPT's forward: per layer c_attn, q k^T, p v, c_proj, c_fc, mlp c_proj;
    then the tied head."""
    return 6 * cfg.n_layer + 1


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_bf16_programs_keep_the_policy(workload):
    progs = programs(workload, "bf16")
    for name, jaxpr in progs.items():
        assert violations(jaxpr, "bf16") == [], name
        n = census(jaxpr)
        # the softmax, the norms and the loss are there, in float32
        assert n[("reduce_max", "float32")] and n[("exp", "float32")] and n[("reduce_sum", "float32")], name
        assert n[("rsqrt", "float32")], name                               # LayerNorm / GroupNorm
        assert n[("dot_general", "float32")], name
        if workload == "diffusion":
            assert n[("conv_general_dilated", "float32")], name
    if workload == "gpt":
        k = gpt_products(TG.CFG)
        assert census(progs["forward"])[("dot_general", "float32")] == k
        # the backward's products are bf16 too: two per product of the forward
        assert census(progs["grads"])[("dot_general", "float32")] == 3 * k
        assert census(progs["train_step"])[("dot_general", "float32")] == 3 * k
    else:
        fwd, grads = census(progs["forward"]), census(progs["grads"])
        assert grads[("conv_general_dilated", "float32")] == 3 * fwd[("conv_general_dilated", "float32")]
        assert grads[("dot_general", "float32")] == 3 * fwd[("dot_general", "float32")]
    # the optimizer's arithmetic: float32 square roots and divisions, nothing in bf16
    assert census(progs["train_step"])[("sqrt", "float32")]


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_fp32_programs_hold_no_bf16(workload):
    for name, jaxpr in programs(workload, "fp32").items():
        assert violations(jaxpr, "fp32") == [], name
        assert not any(str(d) == "bfloat16" for (_, d) in census(jaxpr)), name


# ----------------------------------------------------------------------------- a wrong program fails

def test_the_probe_reports_an_fp32_program_labelled_bf16():
    found = violations(programs("gpt", "fp32")["forward"], "bf16")
    assert found and all("product not bf16" in f for f in found)
    assert len(found) >= gpt_products(TG.CFG) - 2 * TG.CFG.n_layer   # the fused attention's own aside


def test_the_probe_reports_a_bf16_layer_norm(monkeypatch):
    orig = JG.layer_norm

    def layer_norm_bf16(x, w, b):
        return orig(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16), b.astype(jnp.bfloat16)).astype(jnp.float32)
    monkeypatch.setattr(JG, "layer_norm", layer_norm_bf16)
    found = violations(gpt_programs("bf16")["loss"], "bf16")
    # (jnp.mean of bf16 sums in float32 itself: the centring, the variance and rsqrt are bf16)
    for op in ("sub", "square", "rsqrt"):
        assert any(f"computes in bf16: {op} " in f for f in found), (op, found)


def test_the_probe_reports_the_fused_attention_at_bf16(monkeypatch):
    """jax.nn.dot_product_attention on bf16 q, k, v: its softmax is float32, but it rounds the
    probabilities to bf16 and returns p v in bf16, which is why the bf16 path writes it out."""
    def fused(q, k, v, scale, mask=None, kv_layout="bsnh"):
        if kv_layout == "bnsh":  # the decoding cache (its mask is not the point here)
            k, v = k.swapaxes(1, 2), v.swapaxes(1, 2)
        cast = lambda a: a.astype(jnp.bfloat16)  # noqa: E731
        return jax.nn.dot_product_attention(cast(q), cast(k), cast(v), is_causal=q.shape[1] > 1,
                                            scale=scale).astype(jnp.float32)
    monkeypatch.setattr(JG, "attention_bf16", fused)
    found = violations(gpt_programs("bf16")["forward"], "bf16")
    assert any("product not bf16 x bf16 -> float32: dot_general ['bfloat16', 'bfloat16'] -> ['bfloat16']" in f
               for f in found), found


def test_the_probe_reports_a_bf16_group_norm(monkeypatch):
    orig = JD.group_norm

    def group_norm_bf16(x, w, b, groups):
        return orig(x.astype(jnp.bfloat16), w, b, groups).astype(jnp.float32)
    monkeypatch.setattr(JD, "group_norm", group_norm_bf16)
    found = violations(unet_programs("bf16")["forward"], "bf16")
    assert any("computes in bf16" in f for f in found), found


# ----------------------------------------------------------------------------- the built models

def build(workload: str, mode: str, precision: str, params: dict[str, np.ndarray] | None = None):
    fw = frameworks.load("jax")
    cfg, p = (TG.CFG, TG.PARAMS) if workload == "gpt" else (TD.CFG, TD.PARAMS)
    case = Case("jax", workload, None, mode, precision=precision, placement=Placement(DEVICE))
    return fw, fw.build(case, cfg, p if params is None else params)


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_both_workloads_declare_bf16(workload):
    assert importlib.import_module(f"frameworks.jax.{workload}").PRECISIONS == ("fp32", "bf16")


# ----------------------------------------------------------------------------- equivalence

# Tolerances for bf16, measured (docs/measurements/bf16-jax.txt, `python -m tests.test_bf16_jax`):
# tiny presets, O(1) weights, eager and compiled. bf16 keeps 8 bits of mantissa (unit
# roundoff 2^-9 = 2.0e-3): a product of K terms whose inputs are each rounded once has a
# relative error of about 2^-9 per layer, growing with depth; these are the errors achieved.
BF16_TOL = {
    # check                      tolerance   achieved (eager, compiled)
    ("forward", "gpt"): 3e-2,          # 1.20e-2, 1.20e-2   (logits; the orientation 1.6e-2)
    ("loss", "gpt"): 3e-4,             # 2.9e-5, 2.9e-5
    ("grad_cos", "gpt"): 0.995,        # worst tensor 0.99918 (wpe.weight), both modes
    ("forward", "diffusion"): 3e-2,    # 8.95e-3, 8.95e-3   (eps)
    ("loss", "diffusion"): 4e-4,       # 3.9e-5, 3.3e-5
    ("grad_cos", "diffusion"): 0.995,  # worst tensor 0.9990 (down.1.attn.0.k.weight)
    ("grad_fd", "diffusion"): 0.5,     # 5.2e-2, 5.6e-2 (mid.attn_1; a coarse measure, see the file)
    ("sample", "diffusion"): 3e-2,     # 7.0e-3 / 6.9e-3 (10-step DDIM / 5-step DDPM), both modes
    ("train50", "gpt"): 3e-3,          # max |bf16 loss / fp32 loss - 1| over 50 steps: 2.6e-4
}
# Why the forward, gradient and sample tolerances are 2.5-5x the error achieved, not 10x:
# for fixed inputs the bf16 error is a deterministic property of the policy (eager and
# compiled agree to 3 digits), and 10x (logits 0.12, cosine 0.99) would pass errors far
# beyond what bf16 rounding of the products' inputs causes. What breaks the policy without
# moving these numbers much (a norm or softmax in bf16) is the probe's to catch.


_RUNS: dict[tuple[str, str], dict[str, Any]] = {}


def run(workload: str, mode: str) -> dict[str, Any]:
    """The bf16 model's outputs on the fp32 tests' inputs, once per (workload, mode)."""
    key = (workload, mode)
    if key in _RUNS:
        return _RUNS[key]
    fw, m = build(workload, mode, "bf16")
    a = lambda x: fw.asarray(x, DEVICE)  # noqa: E731
    if workload == "gpt":
        batch = (a(TG.TOKENS), a(TG.TARGETS))
        out = {"forward": fw.to_numpy(m.logits(batch[0])),
               "gen": fw.to_numpy(m.generate(a(TG.PROMPT), TG.N_NEW)),
               "gen_nocache": fw.to_numpy(m.generate(a(TG.PROMPT), TG.N_NEW, use_cache=False))}
    else:
        batch = (a(TD.X0), a(TD.T), a(TD.NOISE))
        out = {"forward": fw.to_numpy(m.eps(a(TD.X_NOISY), a(TD.T))),
               "ddim": fw.to_numpy(m.sample(a(TD.X_T), method="ddim", steps=10)),
               "ddpm": fw.to_numpy(m.sample(a(TD.X_T), a(TD.DDPM_NOISE), method="ddpm", steps=TD.DDPM_STEPS))}
    out["loss"] = float(fw.to_numpy(m.loss(*batch)))
    out["grads"] = fw.to_numpy(m.grads(*batch))
    out["step_loss"] = float(fw.to_numpy(m.train_step(*batch)))
    out["state"] = jax.tree.leaves(m.state())
    _RUNS[key] = out
    return out


_REFS: dict[str, dict[str, Any]] = {}


def reference(workload: str) -> dict[str, Any]:
    if workload not in _REFS:
        if workload == "gpt":
            _REFS[workload] = {"forward": gpt.reference_logits(TG.CFG, TG.PARAMS, TG.TOKENS),
                               "loss": gpt.reference_loss(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS),
                               "grads": E.reference_gpt_grad(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS)}
        else:
            _REFS[workload] = {"forward": D.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T),
                               "loss": D.reference_loss(TD.CFG, TD.PARAMS, TD.X0, TD.T, TD.NOISE),
                               "grads": unet_grads_float64(), **TD.reference_samples()}
    return _REFS[workload]


def unet_grads_float64() -> dict[str, np.ndarray]:
    """The UNet's gradient in float64: frameworks/jax/diffusion.py's fp32 path (tested against
    float64 differences by tests/test_diffusion_equivalence.py) run on float64 arrays under
    jax.enable_x64, all but the timestep embedding's sin/cos (float32 by the spec) in float64;
    its directional derivatives are within 1e-5 of the float64 differences (measured)."""
    with jax.enable_x64(True):
        p = {k: jnp.asarray(v, jnp.float64) for k, v in TD.PARAMS.items()}
        sched = {k: jnp.asarray(getattr(TD.CFG.schedule, k))
                 for k in ("sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod")}
        g = jax.grad(partial(JD.loss, cfg=TD.CFG, sched=sched))(
            p, jnp.asarray(TD.X0, jnp.float64), jnp.asarray(TD.T), jnp.asarray(TD.NOISE, jnp.float64))
        return {k: np.asarray(v, np.float64) for k, v in g.items()}


def errors(workload: str, mode: str) -> dict[str, Any]:
    """The measured bf16 errors of one (workload, mode)."""
    out, ref = run(workload, mode), reference(workload)
    skip = TD.W.zero_grad if workload == "diffusion" else (lambda k: False)
    cos = grad_cosines(out["grads"], ref["grads"], skip)
    worst = min(cos, key=cos.get)
    err = {"forward": rel_err(out["forward"], ref["forward"]),
           "loss": abs(out["loss"] - ref["loss"]) / abs(ref["loss"]),
           "grad_cos": (cos[worst], worst)}
    if workload == "diffusion":
        err["grad_fd"] = TD.W.grad_fd_err(out["grads"])
        err["sample"] = {k: rel_err(out[k], ref[k]) for k in ("ddim", "ddpm")}
    return err


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_bf16_matches_the_float64_reference(workload, mode):
    err = errors(workload, mode)
    assert err["forward"] <= BF16_TOL[("forward", workload)], err
    assert err["loss"] <= BF16_TOL[("loss", workload)], err
    assert err["grad_cos"][0] >= BF16_TOL[("grad_cos", workload)], err
    if workload == "diffusion":
        assert err["grad_fd"][0] <= BF16_TOL[("grad_fd", workload)], err
        assert max(err["sample"].values()) <= BF16_TOL[("sample", workload)], err
    # and bf16 is really in use: the error is far above float32's (tests/equivalence.py)
    assert err["forward"] > 100 * E.tol("forward", workload), err


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_bf16_state_stays_float32(workload, mode):
    out = run(workload, mode)
    assert {str(a.dtype) for a in out["state"]} <= {"float32", "int32"}   # params, m, v; AdamW's count
    assert {str(g.dtype) for g in out["grads"].values()} == {"float32"}
    assert np.isfinite(out["step_loss"])


@pytest.mark.parametrize("mode", MODES)
def test_bf16_generation_runs_and_keeps_the_prompt(mode):
    """Greedy tokens at bf16 need not equal float64's (a near tie can flip), so this checks
    the shapes, the prompt and that the cache changes nothing here (measured equal)."""
    out = run("gpt", mode)
    P = TG.PROMPT.shape[1]
    assert out["gen"].shape == (TG.BATCH, P + TG.N_NEW)
    np.testing.assert_array_equal(out["gen"][:, :P], TG.PROMPT)
    np.testing.assert_array_equal(out["gen"], out["gen_nocache"])


# ----------------------------------------------------------------------------- 50 steps

TRAIN_STEPS = 50


def train_losses(precision: str, steps: int = TRAIN_STEPS) -> list[float]:
    """The tiny GPT from GPT-2's init (seed 0), compiled, over 4 batches in turn (seeds
    100..103: random tokens, so the loss falls by memorising them, 5.57 -> 4.15 in 50 steps)."""
    cfg = TG.CFG
    fw, m = build("gpt", "compiled", precision, gpt.init_params(cfg, seed=0))
    losses = []
    for i in range(steps):
        tok, tgt = gpt.make_batch(cfg, TG.BATCH, seed=100 + i % 4)
        losses.append(float(fw.to_numpy(m.train_step(fw.asarray(tok, DEVICE), fw.asarray(tgt, DEVICE)))))
    return losses


@pytest.mark.slow
def test_50_bf16_training_steps_follow_fp32():
    fp32, bf16 = np.array(train_losses("fp32")), np.array(train_losses("bf16"))
    assert np.all(np.isfinite(bf16))
    gap = np.abs(bf16 / fp32 - 1)
    assert gap.max() <= BF16_TOL[("train50", "gpt")], gap
    assert fp32[-1] < 0.8 * fp32[0] and bf16[-1] < 0.8 * bf16[0]   # both train


def measure() -> None:
    """Print every measured bf16 error (the numbers in docs/measurements/bf16-jax.txt)."""
    for workload in ("gpt", "diffusion"):
        for mode in ("eager", "compiled"):
            print(workload, mode, errors(workload, mode))
            out, ref = run(workload, mode), reference(workload)
            skip = TD.W.zero_grad if workload == "diffusion" else (lambda k: False)
            cos = grad_cosines(out["grads"], ref["grads"], skip)
            print("  grad cosines: median", f"{np.median(list(cos.values())):.6f}",
                  "worst three", sorted((round(v, 6), k) for k, v in cos.items())[:3])
    fp32, bf16 = np.array(train_losses("fp32")), np.array(train_losses("bf16"))
    gap = np.abs(bf16 / fp32 - 1)
    print("train50 fp32 losses", np.round(fp32[[0, 9, 19, 29, 39, 49]], 4))
    print("train50 bf16 losses", np.round(bf16[[0, 9, 19, 29, 39, 49]], 4))
    print(f"train50 |bf16/fp32 - 1|: max {gap.max():.2e} at step {int(gap.argmax())}, mean {gap.mean():.2e}")


if __name__ == "__main__":
    measure()
