"""torch's reduced-precision policies (workloads/precision.py) for the GPT and the DDPM UNet:
the shared checks of tests/support/precision_checks.py (equivalence against the float64 references at
the policy's tolerances, 50 training steps against fp32) for torch, and what only torch can
do: a probe of what the model actually runs, every aten op of a forward, loss, gradients,
train step and generation / sampling, recorded with its floating input dtypes under a
TorchDispatchMode (below autograd, so the backward's ops are seen too): products and
convolutions have inputs in the policy's compute dtype; norms, softmax, GELU/SiLU, embeddings,
the loss and the optimizer's update run in float32; parameters, gradients and AdamW's state
stay float32; and the fp32 model runs no reduced op at all. Models that break the policy fail
the probe.

`python -m tests.test_precision_torch` prints the measured errors (docs/measurements/bf16-torch.txt).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from frameworks.torch import diffusion as tdiff
from frameworks.torch import gpt as tgpt
from frameworks.torch import precision as tprec
from tests import test_diffusion_equivalence as TD
from tests import test_gpt_equivalence as TG
from tests.support import equivalence as E
from tests.support import precision_checks as PC
from tests.support.helpers import DEVICE
from workloads import diffusion as D
from workloads import gpt
from workloads.base import rel_err
from workloads.precision import POLICIES

PRECISIONS = ["fp32", *PC.tested_precisions("torch")]


class TestTorch(PC.PrecisionChecks):
    framework = "torch"

    def diffusion_grad_reference(self) -> dict[str, np.ndarray]:
        return diffusion_grad_f64()[1]


CHECKS = TestTorch()


def build(workload: str, precision: str, mode: str = "eager", params: dict | None = None):
    return CHECKS.build(workload, mode, precision, params)[1]


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


# Products and convolutions (and their backward ops): inputs in the policy's compute dtype.
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
# What else may touch a reduced tensor: the casts and layout ops around a product. Any other op
# with a reduced input or output is arithmetic the policy keeps in float32 (a bias added in bf16).
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
    low = POLICIES[precision].compute                    # the products' input dtype
    reduced = {p.compute for p in POLICIES.values()} - {"float32"}
    seen = {name for name, _, _ in calls}
    if low == "float32" and any(FUSED_ATTENTION in name for name in seen):
        seen.add("softmax")                        # fp32 keeps the fused attention's softmax
    for kind, names in REQUIRED[workload].items():
        if not seen & names:
            bad.append(f"no {kind} op ran ({', '.join(sorted(names))})")
    for name, ins, outs in calls:
        if low == "float32":
            if reduced & set(ins + outs):
                bad.append(f"{name}{ins} -> {outs} in an fp32 model")
        elif FUSED_ATTENTION in name:
            bad.append(f"{name}{ins}: fused attention (its softmax is not float32's)")
        elif name in DOT_OPS:
            if set(ins) != {low}:
                bad.append(f"{name}{ins}: a product's inputs not {precision}")
        elif name in F32_OPS or name.startswith(F32_PREFIXES):
            if set(ins) - {"float32"}:
                bad.append(f"{name}{ins}: not float32")
        elif reduced & set(ins + outs) and name not in CAST_AND_LAYOUT:
            bad.append(f"{name}{ins} -> {outs}: arithmetic in {precision}")
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
@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_probe_finds_the_policy_in_what_the_model_runs(workload, precision):
    m = build(workload, precision)
    calls = PROBES[workload](m)
    assert policy_violations(calls, precision, workload) == []
    assert m.optimizer.state and state_not_f32(m) == []
    low = POLICIES[precision].compute
    n_reduced_dots = sum(name in DOT_OPS and low in ins for name, ins, _ in calls if low != "float32")
    assert (n_reduced_dots > 0) == (low != "float32")


def ln_in_bf16(x, w, b):
    return F.layer_norm(x.bfloat16(), (x.size(-1),), w.bfloat16(), b.bfloat16(), gpt.LN_EPS).float()


def fused_bf16_attention(q, k, v, mask, scale, compute):
    return F.scaled_dot_product_attention(q.to(compute), k.to(compute), v.to(compute), attn_mask=mask,
                                          scale=scale).float()


def linear_bias_in_bf16(self, x):
    if self.compute == torch.float32:
        return F.linear(x, self.weight, self.bias)
    y = F.linear(x.to(self.compute), self.weight.to(self.compute))
    return (y if self.bias is None else y + self.bias.to(self.compute)).float()


@pytest.mark.parametrize("wrong", ["layer norm in bf16", "fp32 labelled bf16", "fused bf16 attention",
                                   "bias added in bf16", "group norm in bf16"])
def test_a_model_off_the_policy_fails_the_probe(wrong, monkeypatch):
    workload = "diffusion" if "group" in wrong else "gpt"
    if wrong == "layer norm in bf16":
        monkeypatch.setattr(tgpt, "layer_norm", ln_in_bf16)
        want = "native_layer_norm"
    elif wrong == "fp32 labelled bf16":
        monkeypatch.setattr(tprec, "COMPUTE", {"fp32": torch.float32, "bf16": torch.float32})
        want = "a product's inputs not bf16"
    elif wrong == "fused bf16 attention":
        monkeypatch.setattr(tprec, "written_attention", fused_bf16_attention)
        want = "fused attention"
    elif wrong == "bias added in bf16":
        monkeypatch.setattr(tprec.Linear, "forward", linear_bias_in_bf16)
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


def test_the_float64_unet_gradient_is_the_reference_s():
    """The float64 run of the torch UNet against the numpy float64 loss and its finite
    differences (tests/support/equivalence.py's directional derivatives)."""
    loss, g = diffusion_grad_f64()
    ref = D.reference_loss(TD.CFG, TD.PARAMS, TD.X0, TD.T, TD.NOISE)
    assert abs(loss - ref) / ref < 1e-12
    assert TD.W.grad_fd_err(g)[0] < 1e-8


def test_fp32_keeps_its_own_tolerances():
    """fp32 is the model it was: the fp32 TOL of tests/support/equivalence.py, far below bf16's."""
    for workload in ("gpt", "diffusion"):
        r = CHECKS.measure(workload, "eager", "fp32")
        assert r["forward"] <= E.tol("forward", workload) and r["loss"] <= E.tol("loss", workload)
        assert r["grad_fd"] <= E.tol("grad_fd", workload)
        assert E.tol("forward", workload) < PC.tol("bf16", "torch", workload, "forward_floor")


# ----------------------------------------------------------------------------- compiled

@pytest.mark.slow
@pytest.mark.parametrize("precision", PC.tested_precisions("torch"))
def test_compiled_gpt_agrees_with_eager(precision):
    """torch.compile of the reduced GPT (forward, train step, generation): Inductor may fuse the
    casts but must keep the reduced products; its error is the policy's, like eager's."""
    r = CHECKS.measure("gpt", "compiled", precision)
    assert PC.tol(precision, "torch", "gpt", "forward_floor") < r["forward"] <= PC.tol(precision, "torch", "gpt",
                                                                                      "forward"), r["forward"]
    assert r["grad_cosine"] >= PC.tol(precision, "torch", "gpt", "grad_cosine"), (r["grad_cosine_at"], r["grad_cosine"])
    m = r["model"]
    tok, tgt = arr(TG.TOKENS, TG.TARGETS)
    assert np.isfinite(float(m.train_step(tok, tgt)))
    assert m.generate(torch.tensor(TG.PROMPT, device=DEVICE), 3).shape == (TG.PROMPT.shape[0], TG.PROMPT.shape[1] + 3)


@pytest.mark.slow
@pytest.mark.parametrize("precision", PC.tested_precisions("torch"))
def test_compiled_unet_agrees_with_the_reference(precision):
    """torch.compile of the reduced UNet's forward graphs (eps and the sampler step; its train
    step measured once, docs/measurements/bf16-torch.txt: the loss graph compiles in ~1.5 min here)."""
    m = build("diffusion", precision, "compiled")
    xn, t = arr(TD.X_NOISY, TD.T)
    err = rel_err(m.eps(xn, t).cpu().numpy(), D.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T))
    assert PC.tol(precision, "torch", "diffusion", "forward_floor") < err <= PC.tol(precision, "torch", "diffusion",
                                                                                   "forward"), err
    x = m.sample(torch.tensor(TD.X_T, device=DEVICE), method="ddim", steps=10).cpu().numpy()
    err = rel_err(x, D.reference_sample(TD.CFG, TD.PARAMS, TD.X_T, None, "ddim", 10))
    assert err <= PC.tol(precision, "torch", "diffusion", "ddim"), err


if __name__ == "__main__":
    CHECKS.report()
