"""torch's bf16 policy (workloads/precision.py) for the GPT and the DDPM UNet, tested twice:

  * a probe of what the model actually runs: every aten op of a forward, loss, gradients,
    train step and generation / sampling, recorded with its floating input dtypes under a
    TorchDispatchMode (below autograd, so the backward's ops are seen too): products and
    convolutions have bf16 inputs; norms, softmax, GELU/SiLU, embeddings, the loss and the
    optimizer's update run in float32; parameters, gradients and AdamW's state stay float32;
    and the fp32 model runs no bf16 op at all. Models that break the policy fail the probe.
  * equivalence against the float64 references of tests/test_gpt_equivalence.py and
    tests/test_diffusion_equivalence.py at tolerances measured for bf16 (BF16_TOL), and a
    50-step training run at bf16 against the same run at fp32.

`python -m tests.test_bf16_torch` prints the measured errors (docs/measurements/bf16-torch.txt).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import frameworks
from frameworks.torch import diffusion as tdiff
from frameworks.torch import gpt as tgpt
from tests import equivalence as E
from tests import test_diffusion_equivalence as TD
from tests import test_gpt_equivalence as TG
from tests.helpers import DEVICE, grad_cosines
from workloads import diffusion as D
from workloads import gpt
from workloads.base import rel_err
from workloads.case import Case, Placement

# Tolerances of the bf16 cases, ~10x the error achieved (tiny presets, O(1) weights, eager;
# docs/measurements/bf16-torch.txt has the numbers and the command). The fp32 cases keep
# tests/equivalence.py's TOL untouched.
BF16_TOL = {
    # check                 tolerance   achieved
    ("forward", "gpt"): 1.5e-1,       # 1.4e-2 (logits, relative Frobenius error)
    ("loss", "gpt"): 3e-3,            # 2.3e-4
    ("forward", "diffusion"): 1.2e-1,  # 1.2e-2 (eps)
    ("loss", "diffusion"): 4e-3,      # 3.3e-4
}
# Gradients: cosine similarity with the float64 gradient, per tensor and of all tensors as one
# vector; bounds at 1 - 10 x (1 - the worst cosine achieved, gpt or diffusion). The issue's
# 0.999 per tensor fails the data: the worst tensors reach 0.9985 (gpt h.0.ln_1.bias) and
# 0.9990 (diffusion down.1.attn.0.k.weight); the median tensor 0.99949 (gpt), 0.99994.
GRAD_COSINE = 0.985        # worst tensor: 0.99850 gpt, 0.99896 diffusion
GRAD_COSINE_ALL = 0.989    # all tensors as one vector: 0.99890 gpt, 0.99988 diffusion
# A bf16 model's error lies far above float32's (tests/equivalence.py TOL): one that does
# not is not running bf16 products (the fp32 errors are ~1e-6, the bf16 ones ~1e-2).
BF16_FLOOR = 1e-3


def torch_fw():
    return frameworks.load("torch")


def build(workload: str, precision: str, mode: str = "eager", params: dict | None = None):
    fw = torch_fw()
    W = {"gpt": TG, "diffusion": TD}[workload]
    return fw.build(Case("torch", workload, None, mode, precision=precision, placement=Placement(DEVICE)), W.CFG,
                    W.PARAMS if params is None else params)


def arr(*xs: np.ndarray) -> tuple[torch.Tensor, ...]:
    return tuple(torch.tensor(np.asarray(x), device=DEVICE) for x in xs)


# ----------------------------------------------------------------------------- the probe

class DtypeProbe(TorchDispatchMode):
    """Records (aten op, floating input dtypes, floating output dtypes) of every op run."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.calls.append((func.overloadpacket.__name__, _dtypes((args, kwargs)), _dtypes(out)))
        return out


def _dtypes(tree: Any) -> tuple[str, ...]:
    return tuple(str(t.dtype).removeprefix("torch.") for t in tree_flatten(tree)[0]
                 if isinstance(t, torch.Tensor) and t.is_floating_point())


# Products and convolutions (and their backward ops): bf16 inputs under the bf16 policy.
DOT_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "convolution", "_convolution",
           "convolution_backward", "mkldnn_convolution", "_mkldnn_convolution", "mkldnn_linear"}
# The fused attention computes its softmax inside: never under the bf16 policy.
FUSED_ATTENTION = "scaled_dot_product"
# What runs in float32 under every policy (every floating input float32).
F32_OPS = {"native_layer_norm", "native_layer_norm_backward", "native_group_norm",
           "native_group_norm_backward", "_softmax", "softmax", "_softmax_backward_data",
           "_log_softmax", "_log_softmax_backward_data", "nll_loss_forward", "nll_loss_backward",
           "nll_loss", "cross_entropy_loss", "mse_loss", "mse_loss_backward", "gelu", "gelu_backward",
           "silu", "silu_backward", "embedding", "embedding_dense_backward", "sin", "cos"}
F32_PREFIXES = ("_fused_adam", "_foreach_")     # AdamW's update and the gradient clipping
# What else may touch a bf16 tensor: the casts and layout ops around a product. Any other op
# with a bf16 input or output is arithmetic the policy keeps in float32 (a bias added in bf16).
CAST_AND_LAYOUT = {"_to_copy", "view", "_unsafe_view", "t", "expand", "clone", "transpose", "permute",
                   "reshape", "contiguous", "detach", "alias", "unsqueeze", "squeeze", "slice", "select",
                   "split", "split_with_sizes", "unbind"}
# Kinds that must be seen at all, or the probe proved nothing: name -> ops of that kind.
REQUIRED = {"gpt": {"layer norm": {"native_layer_norm"}, "softmax": {"_softmax", "softmax"},
                    "loss": {"_log_softmax", "nll_loss_forward"}, "gelu": {"gelu"},
                    "update": {"_fused_adamw_"}, "product": {"mm", "bmm", "addmm"},
                    "product backward": {"mm", "bmm"}},
            "diffusion": {"group norm": {"native_group_norm"}, "softmax": {"_softmax", "softmax"},
                          "loss": {"mse_loss"}, "silu": {"silu"}, "update": {"_fused_adamw_"},
                          "convolution": {"convolution"}, "convolution backward": {"convolution_backward"}}}


def policy_violations(calls: list[tuple[str, tuple[str, ...], tuple[str, ...]]], precision: str,
                      workload: str) -> list[str]:
    """What in `calls` breaks the precision policy (empty: nothing)."""
    bad = []
    seen = {name for name, _, _ in calls}
    if precision == "fp32" and any(FUSED_ATTENTION in name for name in seen):
        seen.add("softmax")                        # fp32 keeps the fused attention's softmax
    for kind, names in REQUIRED[workload].items():
        if not seen & names:
            bad.append(f"no {kind} op ran ({', '.join(sorted(names))})")
    for name, ins, outs in calls:
        if precision == "fp32":
            if "bfloat16" in ins + outs:
                bad.append(f"{name}{ins} -> {outs} in an fp32 model")
        elif FUSED_ATTENTION in name:
            bad.append(f"{name}{ins}: fused attention (its softmax is not float32's)")
        elif name in DOT_OPS:
            if set(ins) != {"bfloat16"}:
                bad.append(f"{name}{ins}: a product's inputs not bf16")
        elif name in F32_OPS or name.startswith(F32_PREFIXES):
            if set(ins) - {"float32"}:
                bad.append(f"{name}{ins}: not float32")
        elif "bfloat16" in ins + outs and name not in CAST_AND_LAYOUT:
            bad.append(f"{name}{ins} -> {outs}: arithmetic in bf16")
    return sorted(set(bad))


def probe_gpt(m: Any) -> list:
    tok, tgt = arr(TG.TOKENS, TG.TARGETS)
    with DtypeProbe() as p:
        m.logits(tok)
        m.loss(tok, tgt)
        m.grads(tok, tgt)
        m.train_step(tok, tgt)
        m.generate(tok[:, :5].contiguous(), 3)
        m.generate(tok[:, :5].contiguous(), 2, use_cache=False)
    return p.calls


def probe_diffusion(m: Any) -> list:
    x0, t, noise, xn, x_T, z = arr(TD.X0, TD.T, TD.NOISE, TD.X_NOISY, TD.X_T, TD.DDPM_NOISE)
    with DtypeProbe() as p:
        m.eps(xn, t)
        m.loss(x0, t, noise)
        m.grads(x0, t, noise)
        m.train_step(x0, t, noise)
        m.sample(x_T, method="ddim", steps=2)
        m.sample(x_T, z[:2], method="ddpm", steps=2)
    return p.calls


PROBES = {"gpt": probe_gpt, "diffusion": probe_diffusion}


def state_not_f32(m: Any) -> list[str]:
    """Parameters, gradients and optimizer state that are not float32."""
    bad = [f"param {k} {p.dtype}" for k, p in m._params.items() if p.dtype != torch.float32]
    bad += [f"grad {k} {p.grad.dtype}" for k, p in m._params.items()
            if p.grad is not None and p.grad.dtype != torch.float32]
    for st in m.optimizer.state.values():
        bad += [f"AdamW {k} {v.dtype}" for k, v in st.items() if torch.is_tensor(v) and v.dtype != torch.float32]
    return bad


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_probe_finds_the_policy_in_what_the_model_runs(workload, precision):
    m = build(workload, precision)
    calls = PROBES[workload](m)
    assert policy_violations(calls, precision, workload) == []
    assert m.optimizer.state and state_not_f32(m) == []
    n_bf16_dots = sum(name in DOT_OPS and "bfloat16" in ins for name, ins, _ in calls)
    assert (n_bf16_dots > 0) == (precision == "bf16")


def ln_in_bf16(x, w, b):
    return F.layer_norm(x.bfloat16(), (x.size(-1),), w.bfloat16(), b.bfloat16(), gpt.LN_EPS).float()


def fused_bf16_attention(q, k, v, mask, dtype):
    return F.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), attn_mask=mask).float()


def linear_bias_in_bf16(self, x):
    if self.dot_dtype is None:
        return F.linear(x, self.weight, self.bias)
    y = F.linear(x.to(self.dot_dtype), self.weight.to(self.dot_dtype))
    return (y if self.bias is None else y + self.bias.to(self.dot_dtype)).float()


@pytest.mark.parametrize("wrong", ["layer norm in bf16", "fp32 labelled bf16", "fused bf16 attention",
                                   "bias added in bf16", "group norm in bf16"])
def test_a_model_off_the_policy_fails_the_probe(wrong, monkeypatch):
    workload = "diffusion" if "group" in wrong else "gpt"
    if wrong == "layer norm in bf16":
        monkeypatch.setattr(tgpt, "layer_norm", ln_in_bf16)
        want = "native_layer_norm"
    elif wrong == "fp32 labelled bf16":
        monkeypatch.setattr(tgpt, "DOT_DTYPES", {"fp32": None, "bf16": None})
        want = "a product's inputs not bf16"
    elif wrong == "fused bf16 attention":
        monkeypatch.setattr(tgpt, "written_attention", fused_bf16_attention)
        want = "fused attention"
    elif wrong == "bias added in bf16":
        monkeypatch.setattr(tgpt.Linear, "forward", linear_bias_in_bf16)
        want = "arithmetic in bf16"
    else:
        monkeypatch.setattr(tdiff, "group_norm", lambda x, w, b, g: F.group_norm(
            x.bfloat16(), g, w.bfloat16(), b.bfloat16(), D.GN_EPS).float())
        want = "native_group_norm"
    bad = policy_violations(PROBES[workload](build(workload, "bf16")), "bf16", workload)
    assert any(want in line for line in bad), bad


# ----------------------------------------------------------------------------- equivalence

def diffusion_grad_f64() -> tuple[float, dict[str, np.ndarray]]:
    """The UNet's float64 gradient: this module's fp32 graph run in float64 (workloads.diffusion
    has no numpy gradient); checked against the numpy float64 loss and its finite differences
    in test_the_float64_unet_gradient_is_the_reference_s."""
    m = build("diffusion", "fp32")
    m.net.double()
    sched = TD.CFG.schedule
    m._sqrt_abar = torch.tensor(sched.sqrt_alphas_cumprod, dtype=torch.float64, device=DEVICE)
    m._sqrt_1m_abar = torch.tensor(sched.sqrt_one_minus_alphas_cumprod, dtype=torch.float64, device=DEVICE)
    m.net.temb.freqs = torch.tensor(D.timestep_frequencies(TD.CFG.ch), dtype=torch.float64, device=DEVICE)  # unrounded
    x0, t, noise = arr(TD.X0.astype(np.float64), TD.T, TD.NOISE.astype(np.float64))
    loss = m._loss_fn(x0, t, noise)
    loss.backward()
    return float(loss.detach()), {k: tdiff._to_numpy_layout(p.grad).cpu().numpy() for k, p in m._params.items()}


def measure(workload: str, precision: str = "bf16", mode: str = "eager") -> dict[str, Any]:
    """The errors of a case against the float64 references."""
    fw, m = torch_fw(), build(workload, precision, mode)
    if workload == "gpt":
        tok, tgt = arr(TG.TOKENS, TG.TARGETS)
        fwd = fw.to_numpy(m.logits(tok))
        ref_fwd = gpt.reference_logits(TG.CFG, TG.PARAMS, TG.TOKENS)
        loss, ref_loss = float(m.loss(tok, tgt)), gpt.reference_loss(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS)
        grads = fw.to_numpy(m.grads(tok, tgt))
        ref_grads = E.reference_gpt_grad(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS)
        cos = grad_cosines(grads, ref_grads)
        fd = TG.W.grad_fd_err(grads)
    else:
        x0, t, noise, xn = arr(TD.X0, TD.T, TD.NOISE, TD.X_NOISY)
        fwd = fw.to_numpy(m.eps(xn, t))
        ref_fwd = D.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T)
        loss, ref_loss = float(m.loss(x0, t, noise)), D.reference_loss(TD.CFG, TD.PARAMS, TD.X0, TD.T, TD.NOISE)
        grads = fw.to_numpy(m.grads(x0, t, noise))
        ref_grads = diffusion_grad_f64()[1]
        cos = grad_cosines(grads, ref_grads, skip=TD.W.zero_grad)
        fd = TD.W.grad_fd_err(grads)
    worst = min(cos, key=cos.get)
    keys = list(cos)
    flat = lambda g: np.concatenate([np.asarray(g[k], np.float64).ravel() for k in keys])  # noqa: E731
    ref = flat(ref_grads)
    return {"forward": rel_err(fwd, ref_fwd), "loss": abs(loss - ref_loss) / abs(ref_loss),
            "cosine": cos[worst], "cosine_tensor": worst, "cosine_median": float(np.median(list(cos.values()))),
            "cosine_all": grad_cosines({"all": flat(grads)}, {"all": ref})["all"], "grad_fd": fd, "model": m}


@pytest.fixture(scope="module")
def measured() -> dict:
    return {w: measure(w) for w in ("gpt", "diffusion")}


def test_the_float64_unet_gradient_is_the_reference_s():
    """The float64 run of the torch UNet against the numpy float64 loss and its finite
    differences (tests/equivalence.py's directional derivatives)."""
    loss, g = diffusion_grad_f64()
    ref = D.reference_loss(TD.CFG, TD.PARAMS, TD.X0, TD.T, TD.NOISE)
    assert abs(loss - ref) / ref < 1e-12
    assert TD.W.grad_fd_err(g)[0] < 1e-8


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_bf16_forward_loss_and_grads_match_the_float64_reference(workload, measured):
    r = measured[workload]
    assert BF16_FLOOR < r["forward"] <= BF16_TOL[("forward", workload)], r["forward"]
    assert r["loss"] <= BF16_TOL[("loss", workload)], r["loss"]
    assert r["cosine"] >= GRAD_COSINE, (r["cosine_tensor"], r["cosine"])
    assert r["cosine_all"] >= GRAD_COSINE_ALL, r["cosine_all"]


def test_fp32_keeps_its_own_tolerances():
    """fp32 is the model it was: the fp32 TOL of tests/equivalence.py, far below bf16's."""
    for workload in ("gpt", "diffusion"):
        r = measure(workload, "fp32")
        assert r["forward"] <= E.tol("forward", workload) and r["loss"] <= E.tol("loss", workload)
        assert r["grad_fd"][0] <= E.tol("grad_fd", workload)
        assert E.tol("forward", workload) < BF16_FLOOR


def test_bf16_generation_and_sampling_follow_the_reference(measured):
    """Greedy tokens (argmax, not a smooth function: measured equal to the float64 reference,
    with and without the cache) and the 10-step DDIM trajectory (relative error)."""
    m = measured["gpt"]["model"]
    prompt = torch.tensor(TG.PROMPT, device=DEVICE)
    ref = gpt.reference_generate(TG.CFG, TG.PARAMS, TG.PROMPT, TG.N_NEW)
    for use_cache in (True, False):
        out = m.generate(prompt, TG.N_NEW, use_cache=use_cache).cpu().numpy()
        np.testing.assert_array_equal(out[:, :TG.PROMPT.shape[1]], TG.PROMPT)
        assert (out == ref).mean() >= 0.9, (use_cache, out, ref)
    d = measured["diffusion"]["model"]
    x = d.sample(torch.tensor(TD.X_T, device=DEVICE), method="ddim", steps=10).cpu().numpy()
    err = rel_err(x, D.reference_sample(TD.CFG, TD.PARAMS, TD.X_T, None, "ddim", 10))
    assert err <= SAMPLE_TOL, err


SAMPLE_TOL = 1e-1          # 10-step DDIM, achieved 8.5e-3 (eager; compiled 8.3e-3)


# ----------------------------------------------------------------------------- training

# GPT-2's init, 4 batches in turn (random tokens: the model learns them, 5.57 -> 4.15).
TRAIN_STEPS = 50
TRAIN_BATCHES = 4
# |bf16 - fp32| / fp32 loss at every step: the 2% bound, and ~10x the gap achieved,
# 1.7e-4 (worst step; mean 5.1e-5).
TRAIN_GAP = 2e-3


def train_losses(precision: str) -> np.ndarray:
    cfg, batch = TG.CFG, gpt.preset("tiny").batch
    m = build("gpt", precision, params=gpt.init_params(cfg, seed=0))
    batches = [arr(*gpt.make_batch(cfg, batch, seed=100 + s)) for s in range(TRAIN_BATCHES)]
    return np.array([float(m.train_step(*batches[s % TRAIN_BATCHES])) for s in range(TRAIN_STEPS)])


def test_50_steps_of_bf16_training_follow_fp32():
    f32, b16 = train_losses("fp32"), train_losses("bf16")
    gap = np.abs(b16 - f32) / f32
    assert np.all(np.isfinite(b16)) and b16[-1] < 0.9 * b16[0]
    assert gap.max() <= TRAIN_GAP, (int(gap.argmax()), float(gap.max()))


# ----------------------------------------------------------------------------- compiled

@pytest.mark.slow
def test_compiled_bf16_gpt_agrees_with_eager_bf16():
    """torch.compile of the bf16 GPT (forward, train step, generation): Inductor may fuse the
    casts but must keep the bf16 products; its error is bf16's, like eager's."""
    r = measure("gpt", "bf16", "compiled")
    assert BF16_FLOOR < r["forward"] <= BF16_TOL[("forward", "gpt")], r["forward"]
    assert r["cosine"] >= GRAD_COSINE, (r["cosine_tensor"], r["cosine"])
    m = r["model"]
    tok, tgt = arr(TG.TOKENS, TG.TARGETS)
    assert np.isfinite(float(m.train_step(tok, tgt)))
    assert m.generate(torch.tensor(TG.PROMPT, device=DEVICE), 3).shape == (TG.PROMPT.shape[0], TG.PROMPT.shape[1] + 3)


@pytest.mark.slow
def test_compiled_bf16_unet_agrees_with_the_reference():
    """torch.compile of the bf16 UNet's forward graphs (eps and the sampler step; its train step
    measured once, docs/measurements/bf16-torch.txt: the loss graph compiles in ~1.5 min here)."""
    m = build("diffusion", "bf16", "compiled")
    xn, t = arr(TD.X_NOISY, TD.T)
    err = rel_err(m.eps(xn, t).cpu().numpy(), D.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T))
    assert BF16_FLOOR < err <= BF16_TOL[("forward", "diffusion")], err
    x = m.sample(torch.tensor(TD.X_T, device=DEVICE), method="ddim", steps=10).cpu().numpy()
    err = rel_err(x, D.reference_sample(TD.CFG, TD.PARAMS, TD.X_T, None, "ddim", 10))
    assert err <= SAMPLE_TOL, err


def main() -> None:
    for w in ("gpt", "diffusion"):
        for p in ("fp32", "bf16"):
            r = measure(w, p)
            print(f"{w} {p} eager: forward {r['forward']:.2e}  loss {r['loss']:.2e}  grad cosine: worst tensor "
                  f"{r['cosine']:.6f} ({r['cosine_tensor']}), median {r['cosine_median']:.6f}, all "
                  f"{r['cosine_all']:.6f} (1 - cosine: {1 - r['cosine']:.1e}, {1 - r['cosine_median']:.1e}, "
                  f"{1 - r['cosine_all']:.1e})  grad_fd {r['grad_fd'][0]:.2e} ({r['grad_fd'][1]})")
            if p == "bf16":
                m = r["model"]
                if w == "gpt":
                    ref = gpt.reference_generate(TG.CFG, TG.PARAMS, TG.PROMPT, TG.N_NEW)
                    for c in (True, False):
                        out = m.generate(torch.tensor(TG.PROMPT, device=DEVICE), TG.N_NEW, use_cache=c).cpu().numpy()
                        print(f"  generate use_cache={c}: tokens equal to the float64 reference "
                              f"{(out == ref).mean():.3f}")
                else:
                    x = m.sample(torch.tensor(TD.X_T, device=DEVICE), method="ddim", steps=10).cpu().numpy()
                    ref = D.reference_sample(TD.CFG, TD.PARAMS, TD.X_T, None, "ddim", 10)
                    print(f"  ddim 10 steps: relative error {rel_err(x, ref):.2e}")
    f32, b16 = train_losses("fp32"), train_losses("bf16")
    gap = np.abs(b16 - f32) / f32
    print(f"gpt 50 steps: fp32 loss {f32[0]:.4f} -> {f32[-1]:.4f}, bf16 {b16[0]:.4f} -> {b16[-1]:.4f}, "
          f"max relative gap {gap.max():.2e} at step {int(gap.argmax())}, mean {gap.mean():.2e}")


if __name__ == "__main__":
    main()
