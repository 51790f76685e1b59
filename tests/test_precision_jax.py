"""JAX's reduced-precision policies (workloads/precision.py) for the GPT and the DDPM UNet: the
shared checks of tests/support/precision_checks.py for JAX (equivalence against the float64 references
at the policy's tolerances, eager and compiled; 50 compiled training steps against fp32), and
what only JAX can do:

1. A probe of the dtypes the programs actually run: jax.make_jaxpr of the forward, the loss,
   the gradient and the training step (and generation / sampling), every sub-program walked
   (pjit, custom_jvp / custom_vjp, scan / while bodies). At a reduced policy every dot_general
   and conv_general_dilated takes operands in its compute dtype and returns float32, and
   nothing else computes in it (reduced values may only be cast, moved or reshaped on their way
   into a product): the norms, the softmax (reduce_max, exp, reduce_sum), GELU/SiLU, the loss
   and the optax update are float32. The fp32 programs hold no reduced dtype at all. A wrong
   program fails the probe.
2. The UNet's float64 gradient for the shared checks: the fp32 path run in float64 under
   jax.enable_x64; and the parameters, gradients and optax state stay float32.

`python -m tests.test_precision_jax` prints the measured errors (docs/measurements/bf16-jax.txt).
"""
from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any, Iterator

import numpy as np
import pytest

from tests.support.helpers import DEVICE, INSTALLED

if "jax" not in INSTALLED:
    pytest.skip("needs jax", allow_module_level=True)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import frameworks  # noqa: E402
from frameworks.jax import diffusion as JD  # noqa: E402
from frameworks.jax import gpt as JG  # noqa: E402
from frameworks.jax import precision as JP  # noqa: E402
from tests import test_diffusion_equivalence as TD  # noqa: E402
from tests import test_gpt_equivalence as TG  # noqa: E402
from tests.support import precision_checks as PC  # noqa: E402
from workloads import diffusion as D  # noqa: E402
from workloads import gpt  # noqa: E402
from workloads.precision import POLICIES  # noqa: E402

F32 = jnp.dtype(jnp.float32)
REDUCED = PC.tested_precisions("jax")
PRODUCTS = {"dot_general", "conv_general_dilated"}
# What reduced values may pass through on their way into a product: casts and data movement.
MOVES = {"convert_element_type", "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims",
         "slice", "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "rev", "copy", "copy_p",
         "pjit", "jit", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "scan", "while",
         "cond", "closed_call", "remat", "checkpoint", "platform_index"}
# cuDNN's flash attention (frameworks/jax/precision.py, on a CUDA GPU at a reduced policy): its
# primitives take q, k, v in the compute dtype and return the output and the q, k, v gradients in
# it; inside, both products accumulate in float32 and the softmax statistics are float32 (a float32
# output of the forward). It is the one fused kernel the probe lets take reduced values.
CUDNN_FUSED = {"dot_product_attention_fwd_wrapper", "dot_product_attention_bwd_wrapper",
               "dot_product_attention_fwd", "dot_product_attention_bwd"}


class TestJax(PC.PrecisionChecks):
    framework = "jax"
    modes = ("eager", "compiled")
    train_mode = "compiled"
    train_slow = True

    def diffusion_grad_reference(self) -> dict[str, np.ndarray]:
        return unet_grads_float64()


CHECKS = TestJax()


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
    fp32: no reduced value anywhere. A reduced policy: every product low x low -> float32 (low,
    its compute dtype), and no other operation but casts and data movement touches a low value."""
    low = jnp.dtype(POLICIES[precision].compute)
    reduced = {jnp.dtype(p.compute) for p in POLICIES.values()} - {F32}
    out = []
    for e in equations(jaxpr):
        name, ins, outs = e.primitive.name, _dtypes(e.invars), _dtypes(e.outvars)
        where = f"{name} {[str(d) for d in ins]} -> {[str(d) for d in outs]}"
        if low == F32:
            if reduced & set(ins + outs):
                out.append(f"{' '.join(str(d) for d in reduced & set(ins + outs))} in an fp32 program: " + where)
        elif name in PRODUCTS:
            if any(d != low for d in ins) or outs != [F32]:
                out.append(f"a product not {precision} x {precision} -> float32: " + where)
        elif name in CUDNN_FUSED:
            if any(d != low for d in ins[:3]):
                out.append(f"cuDNN's attention not on {precision} q, k, v: " + where)
        elif name not in MOVES and low in ins + outs:
            out.append(f"computes in {precision}: " + where)
    return out


def census(jaxpr: Any) -> Counter:
    """(primitive, dtype of its first output) -> how many, over every sub-program."""
    return Counter((e.primitive.name, str(_dtypes(e.outvars)[0]) if _dtypes(e.outvars) else "")
                   for e in equations(jaxpr))


def _arrays(tree: Any) -> Any:
    return jax.tree.map(jnp.asarray, tree)


def gpt_programs(precision: str) -> dict[str, Any]:
    """The GPT's programs at `precision`, as frameworks/jax/gpt.py's JaxGPT composes them."""
    cfg, p, compute = TG.CFG, _arrays(TG.PARAMS), JP.COMPUTE[precision]
    tok, tgt, prompt = jnp.asarray(TG.TOKENS), jnp.asarray(TG.TARGETS), jnp.asarray(TG.PROMPT)
    tx = JG.adamw(TG.PARAMS, gpt.OPTIMIZER, gpt.decayed)
    loss = partial(JG.loss, cfg=cfg, compute=compute)
    mk = jax.make_jaxpr
    return {"forward": mk(partial(JG.logits, cfg=cfg, compute=compute))(p, tok),
            "loss": mk(loss)(p, tok, tgt),
            "grads": mk(jax.grad(loss))(p, tok, tgt),
            "train_step": mk(partial(JG.train_step, cfg=cfg, tx=tx, compute=compute))(p, tx.init(p), tok, tgt),
            "generate": mk(partial(JG.generate_cached, cfg=cfg, loop=jax.lax.fori_loop, n_new=4,
                                   compute=compute))(p, prompt)}


def unet_programs(precision: str) -> dict[str, Any]:
    """The UNet's programs at `precision`, as frameworks/jax/diffusion.py's JaxDiffusion composes them."""
    cfg, p, compute = TD.CFG, _arrays(TD.PARAMS), JP.COMPUTE[precision]
    x0, t, noise = jnp.asarray(TD.X0), jnp.asarray(TD.T), jnp.asarray(TD.NOISE)
    sch = cfg.schedule
    sched = {k: jnp.asarray(getattr(sch, k).astype(np.float32))
             for k in ("sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod")}
    tx = JD.adamw(TD.PARAMS, D.OPTIMIZER, D.decayed)
    loss = partial(JD.loss, cfg=cfg, sched=sched, compute=compute)
    c = D.sampler_coefficients(sch, "ddim", 3)
    coefs = {"t": jnp.asarray(c["t"].astype(np.int32)), **{k: jnp.asarray(c[k].astype(np.float32)) for k in "abc"}}
    mk = jax.make_jaxpr
    return {"forward": mk(partial(JD.eps, cfg=cfg, compute=compute))(p, jnp.asarray(TD.X_NOISY), t),
            "loss": mk(loss)(p, x0, t, noise),
            "grads": mk(jax.grad(loss))(p, x0, t, noise),
            "train_step": mk(partial(JD.train_step, cfg=cfg, sched=sched, tx=tx, compute=compute))(
                p, tx.init(p), x0, t, noise),
            "sample": mk(partial(JD.sample_loop, cfg=cfg, scan=jax.lax.scan, compute=compute))(
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
@pytest.mark.parametrize("precision", REDUCED)
def test_reduced_programs_keep_the_policy(workload, precision):
    progs = programs(workload, precision)
    for name, jaxpr in progs.items():
        assert violations(jaxpr, precision) == [], name
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
    # the optimizer's arithmetic: float32 square roots and divisions, nothing reduced
    assert census(progs["train_step"])[("sqrt", "float32")]


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_fp32_programs_hold_no_reduced_dtype(workload):
    reduced = {p.compute for p in POLICIES.values()} - {"float32"}
    for name, jaxpr in programs(workload, "fp32").items():
        assert violations(jaxpr, "fp32") == [], name
        assert not any(str(d) in reduced for (_, d) in census(jaxpr)), name


# ----------------------------------------------------------------------------- a wrong program fails

def test_the_probe_reports_an_fp32_program_labelled_bf16():
    found = violations(programs("gpt", "fp32")["forward"], "bf16")
    assert found and all("product not bf16" in f for f in found)
    assert len(found) >= gpt_products(TG.CFG) - 2 * TG.CFG.n_layer   # the fused attention's own aside


def test_the_probe_reports_a_bf16_layer_norm(monkeypatch):
    orig = JG.layer_norm

    def layer_norm_bf16(x, w, b, *forms):
        return orig(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16), b.astype(jnp.bfloat16), *forms).astype(jnp.float32)
    monkeypatch.setattr(JG, "layer_norm", layer_norm_bf16)
    found = violations(gpt_programs("bf16")["loss"], "bf16")
    # (jnp.mean of bf16 sums in float32 itself: the centring, the variance and rsqrt are bf16)
    for op in ("sub", "square", "rsqrt"):
        assert any(f"computes in bf16: {op} " in f for f in found), (op, found)


def test_the_probe_reports_the_fused_attention_at_bf16(monkeypatch):
    """jax.nn.dot_product_attention on bf16 q, k, v: its softmax is float32, but it rounds the
    probabilities to bf16 and returns p v in bf16, which is why the bf16 path writes it out."""
    def fused(q, k, v, scale, compute, mask=None, kv_layout="bsnh"):
        if kv_layout == "bnsh":  # the decoding cache (its mask is not the point here)
            k, v = k.swapaxes(1, 2), v.swapaxes(1, 2)
        cast = lambda a: a.astype(jnp.bfloat16)  # noqa: E731
        return jax.nn.dot_product_attention(cast(q), cast(k), cast(v), is_causal=q.shape[1] > 1,
                                            scale=scale).astype(jnp.float32)
    monkeypatch.setattr(JP, "written_attention", fused)
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


# ----------------------------------------------------------------------------- cuDNN's attention on a GPU

@pytest.mark.parametrize("kind", ["causal", "decode"])
def test_cudnn_attention_keeps_the_policy_on_a_gpu(kind):
    """On a CUDA GPU whose cuDNN compiles it (.ci/gpu-check runs this file there; skipped with
    the reason elsewhere): the bf16 attention the layers run is cuDNN's flash kernel (its custom
    call in the compiled program), within bf16's error of a float64 attention computed apart
    (jax.enable_x64 on the CPU), forward and (causal) all three gradients: no farther than the
    written form (its scores and softmax float32, float32 results) plus the one rounding of the
    kernel's result to bf16 (unit roundoff 2^-9 of the largest value, doubled)."""
    why = JP.cudnn_refusal(jnp.bfloat16, *JP.PROBE)
    if why is not None:
        pytest.skip(f"cuDNN's attention is not available here: {why}")
    gpu = jax.devices("gpu")[0]
    B, S, nh, hs, pos = 2, 128, 4, 64, 70
    T, scale = (S if kind == "causal" else 1), hs ** -0.5
    rng = np.random.default_rng(5)
    q = rng.standard_normal((B, T, nh, hs), dtype=np.float32)
    k, v = (rng.standard_normal((B, S, nh, hs) if kind == "causal" else (B, nh, S, hs), dtype=np.float32)
            for _ in range(2))
    w = rng.standard_normal((B, T, nh, hs), dtype=np.float32)               # a cotangent

    def plain(q, k, v, w):                                                  # the float64 reference
        if kind == "decode":
            k, v = k.swapaxes(1, 2), v.swapaxes(1, 2)
        s = jnp.einsum("btnh,bsnh->bnts", q, k) * scale
        seen = jnp.tril(jnp.ones((T, S), bool)) if kind == "causal" else (jnp.arange(S) <= pos)[None, :]
        p = jax.nn.softmax(jnp.where(seen, s, -jnp.inf), axis=-1)
        return (jnp.einsum("bnts,bsnh->btnh", p, v) * w).sum()
    with jax.enable_x64(True):
        cpu = jax.devices("cpu")[0]
        ref = [np.asarray(x) for x in jax.jit(jax.value_and_grad(plain, (0, 1, 2)))(
            *(jax.device_put(a.astype(np.float64), cpu) for a in (q, k, v, w)))[1]]
        ref_out = np.asarray(jax.jit(lambda *a: jax.grad(plain, 3)(*a))(
            *(jax.device_put(a.astype(np.float64), cpu) for a in (q, k, v, w))))

    def ours(q, k, v, w):
        pos_ = None if kind == "causal" else pos
        return (JP.attention(q, k, v, scale, jnp.bfloat16, causal=kind == "causal", pos=pos_) * w).sum()

    def written(q, k, v, w):
        if kind == "causal":
            mask = jnp.tril(jnp.ones((T, S), bool))
            return (JP.written_attention(q, k, v, scale, jnp.bfloat16, mask) * w).sum()
        return (JP.written_attention(q, k, v, scale, jnp.bfloat16, jnp.arange(S) <= pos, kv_layout="bnsh")
                * w).sum()
    args = [jax.device_put(a, gpu) for a in (q, k, v, w)]
    hlo = jax.jit(jax.grad(ours, 3)).lower(*args).compile().as_text()
    assert "__cudnn$fmha" in hlo, "the bf16 attention on the GPU is not cuDNN's"
    bound = 2 * 2 ** -9
    for fn_of, name in ((lambda f: jax.grad(f, 3), "output"),) + (
            ((lambda f: jax.grad(f, (0, 1, 2)), "q, k, v gradients"),) if kind == "causal" else ()):
        got = jax.jit(fn_of(ours))(*args)
        wr = jax.jit(fn_of(written))(*args)
        want = ref_out if name == "output" else ref
        got, wr = (g if isinstance(g, tuple) else (g,) for g in (got, wr))
        want = want if isinstance(want, list) else [want]
        for g, r, x in zip(got, wr, want):
            g, r = np.asarray(g), np.asarray(r)
            assert g.dtype == np.float32
            e, e_written = float(np.abs(g - x).max()), float(np.abs(r - x).max())
            assert e <= e_written + bound * float(np.abs(x).max()), (name, e, e_written)


# ----------------------------------------------------------------------------- the built models

@pytest.mark.parametrize("mode", [pytest.param("eager", id="eager"),
                                  pytest.param("compiled", id="compiled", marks=pytest.mark.slow)])
@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
@pytest.mark.parametrize("precision", REDUCED)
def test_reduced_state_stays_float32(precision, workload, mode):
    err = CHECKS.measure(workload, mode, precision)
    fw, m = frameworks.load("jax"), err["model"]
    batch = (TG.TOKENS, TG.TARGETS) if workload == "gpt" else (TD.X0, TD.T, TD.NOISE)
    step_loss = float(fw.to_numpy(m.train_step(*(fw.asarray(x, DEVICE) for x in batch))))
    assert {str(a.dtype) for a in jax.tree.leaves(m.state())} <= {"float32", "int32"}   # params, m, v; AdamW's count
    assert {str(g.dtype) for g in err["grads"].values()} == {"float32"}
    assert np.isfinite(step_loss)


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


if __name__ == "__main__":
    CHECKS.report()
