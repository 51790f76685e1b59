"""The equivalence checks every workload shares, run once per (framework, mode), and the
one table of their tolerances.

A workload's test module describes its inputs in a `Workload` (parameters scaled so that
activations are O(1): GELU, softmax and the norms work well away from their linear range)
and calls these checks. Every reference is independent of the implementation checked:
  * export round-trips exactly;
  * the forward output and the loss match the numpy float64 reference;
  * the gradients match float64 finite differences of the numpy reference loss along a
    random direction per parameter group (directional derivatives);
  * the parameters after 3 optimizer steps match `adamw_reference` fed with the
    implementation's own gradients at each step (compared as updates, p3 - p0);
  * the loss falls over 20 steps on one batch; compiled/graph modes agree with eager;
  * (the GPT) second order on whole tensors: the Hessian-vector product H v of the mean loss,
    every parameter tensor, against 4th-order central differences of the float64 numpy
    gradient along v (`reference_gpt_grad`, analytic backpropagation, itself checked against
    differences of the float64 loss), so a LayerNorm exact at first order only (a variance
    around stop_gradient(mean), as tf.nn.moments computes it) fails it in any framework.

Relative error is the Frobenius norm ||a - b|| / ||b|| per tensor (workloads.base.rel_err).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import frameworks
from tests.support.helpers import DEVICE
from workloads import gpt
from workloads.base import AdamW, adamw_reference, rel_err

# Training steps of the loss-falls check: the tiny presets' loss is below 0.70 (GPT) and 0.60
# (DDPM) of the first by the eighth step in every framework (torch eager: 0.699, 0.596).
STEPS = 8
ADAM_STEPS = 3

# Tolerances, ~10x the worst error achieved over torch, jax and tensorflow in every mode
# (eager, compiled, graph) with O(1) weights (tests/support/helpers.o1_params), at the tiny presets
# and at the timed ones (tests/test_preset_equivalence.py: small, gpt2, ddpm-cifar; eager).
# Measured with `python -m tests.measure.measure_equivalence` (tiny) on the 2-core CPU machine;
# "achieved" lists the worst value per framework over its modes and the presets.
TOL: dict[tuple[str, str], float] = {
    # check                       tolerance  achieved: torch, jax, tf
    ("forward", "gpt"): 3e-5,         # 3.1e-6, 3.4e-6, 3.0e-6 (gpt2 preset; tiny 8.2e-7, 7.9e-7, 8.8e-7)
    ("forward", "diffusion"): 8e-5,   # 7.5e-6, 7.0e-6, 7.7e-6 (ddpm-cifar; tiny 2.0e-6, 2.1e-6, 2.1e-6)
    ("loss", "gpt"): 1e-6,            # 8.1e-8, 4.3e-8, 4.3e-8
    ("loss", "diffusion"): 3e-6,      # 1.3e-7, 3.2e-7, 1.3e-7
    ("grad_fd", "gpt"): 6e-5,         # 6.4e-6, 4.2e-6, 5.6e-6 (directional derivatives, tiny)
    ("grad_fd", "diffusion"): 1e-4,   # 9.4e-6, 1.1e-5, 9.9e-6
    ("adamw", "gpt"): 2e-4,           # 1.5e-5, 9.3e-6, 1.5e-5 (update p_n - p_0 vs numpy AdamW, own grads)
    ("adamw", "diffusion"): 1e-3,     # 7.6e-6, 1.1e-4, 1.1e-4 (small; GroupNorm weights ~1: float32 ulp)
    ("sample", "diffusion"): 2e-5,    # 1.6e-6, 1.6e-6, 1.6e-6 (10-step DDIM, 5-step DDPM)
    # compiled/graph vs eager of the same framework: the forward as against numpy; gradients
    # per tensor, kept at the earlier 1e-4 (not re-measured per tensor at O(1) weights)
    ("mode_forward", "gpt"): 3e-5,
    ("mode_forward", "diffusion"): 8e-5,
    ("mode_grads", "gpt"): 1e-4,
    ("mode_grads", "diffusion"): 1e-4,
    # H v of the GPT's mean loss, per tensor (the worst tensor) against differences of the
    # float64 gradient (tests/test_gpt_equivalence.py, tiny, O(1) weights, fwd_rev and rev_rev;
    # eager, JAX jit, TF graph and XLA): a LayerNorm with stop_gradient(mean) is 2.3e-2 off (TF)
    ("hvp", "gpt"): 5e-5,             # 4.4e-6, 5.3e-6, 4.7e-6 (whole vector 2.8e-6..3.8e-6)
    # primitives (tests/support/primitives.py), against numpy float64 on the same float32 inputs
    ("gelu", "primitive"): 4e-7,               # 2.0e-8, 3.3e-8, 3.4e-8
    ("layer_norm", "primitive"): 1e-6,         # 8.6e-8, 8.7e-8, 8.6e-8 (row std 1e-3..1e2)
    ("causal_attention", "primitive"): 1e-6,   # 7.6e-8, 7.4e-8, 7.7e-8
    ("cross_entropy", "primitive"): 1e-6,      # 8.2e-8, 3.5e-8, 3.5e-8
    ("group_norm", "primitive"): 2e-6,         # 6.6e-8, 1.3e-7, 8.6e-8 (group std 1e-3..1e2)
    ("timestep_embedding", "primitive"): 5e-5,  # 4.7e-6 in all three (float32 t * f, t up to 999)
}

FD_H = 1e-3   # step of the 4th-order central difference along a unit direction (float64)


def tol(check: str, workload: str) -> float:
    return TOL[(check, workload)]


@dataclass
class Workload:
    name: str                                   # "gpt", "diffusion"
    config: Any
    params: dict[str, np.ndarray]
    forward: tuple[str, tuple[np.ndarray, ...]]  # model method and its inputs
    batch: tuple[np.ndarray, ...]               # inputs of loss / grads / train_step
    optimizer: AdamW
    decayed: Callable[[str, tuple[int, ...]], bool]
    ref_loss: Callable[[dict[str, np.ndarray]], float]   # numpy float64 loss of float64 params
    # name -> (method, inputs, kwargs): workload-specific outputs (generation, sampling)
    extras: dict[str, tuple[str, tuple[np.ndarray, ...], dict[str, Any]]] = field(default_factory=dict)
    loss_drop: float = 0.8                      # loss after STEPS steps < loss_drop * first loss
    # parameters whose gradient is exactly zero in exact arithmetic (e.g. attention key
    # biases: they shift every score of a softmax row equally). Their float32 values are
    # rounding residue, so they are checked to be negligible instead of compared.
    zero_grad: Callable[[str], bool] = lambda name: False
    # which finite-difference direction a parameter belongs to (one random direction per
    # group; the default, one per tensor, costs 4 reference losses per tensor)
    group: Callable[[str], str] = lambda name: name
    _cache: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    _fd: list[tuple[str, dict[str, np.ndarray], float]] | None = None

    def build(self, name: str, mode: str):
        fw = frameworks.load(name)
        return fw, fw.build(self.name, self.config, self.params, mode, DEVICE)

    def run(self, name: str, mode: str, steps: int = STEPS, extras: tuple[str, ...] | None = None,
            cache: bool = True) -> dict[str, Any]:
        """Everything the checks compare, computed once per implementation, in an order
        that leaves training (which changes the parameters) for last: the gradient before
        each of the first ADAM_STEPS steps is kept for the AdamW check."""
        key = (name, mode)
        if cache and key in self._cache:
            return self._cache[key]
        fw, m = self.build(name, mode)
        arr = lambda xs: tuple(fw.asarray(a, DEVICE) for a in xs)  # noqa: E731
        method, inputs = self.forward
        batch = arr(self.batch)
        out = {"export": m.export_params(),
               "forward": fw.to_numpy(getattr(m, method)(*arr(inputs))),
               "loss": float(fw.to_numpy(m.loss(*batch))),
               "grads": fw.to_numpy(m.grads(*batch)),
               "grads_seq": [], "losses": []}
        for k in self.extras if extras is None else extras:
            meth, ins, kw = self.extras[k]
            out[k] = fw.to_numpy(getattr(m, meth)(*arr(ins), **kw))
        for step in range(steps):
            if step < ADAM_STEPS:
                out["grads_seq"].append(out["grads"] if step == 0 else fw.to_numpy(m.grads(*batch)))
            out["losses"].append(float(fw.to_numpy(m.train_step(*batch))))
            if step == min(steps, ADAM_STEPS) - 1:
                out["after3"] = m.export_params()   # after the steps of grads_seq
        if cache:
            self._cache[key] = out
        return out

    # -- measured errors (each check asserts one of these against TOL) ---------------------
    def forward_err(self, out: dict[str, Any], ref_forward: np.ndarray) -> float:
        assert out["forward"].shape == ref_forward.shape
        return rel_err(out["forward"], ref_forward)

    def loss_err(self, out: dict[str, Any], ref_loss: float) -> float:
        return abs(out["loss"] - ref_loss) / abs(ref_loss)

    def fd_directions(self) -> list[tuple[str, dict[str, np.ndarray], float]]:
        """Per group: a random unit direction d and the reference loss's derivative along it,
        (-L(p+2hd) + 8L(p+hd) - 8L(p-hd) + L(p-2hd)) / 12h in float64 (error O(h^4))."""
        if self._fd is None:
            rng = np.random.default_rng(0)
            p0 = {k: v.astype(np.float64) for k, v in self.params.items()}
            groups: dict[str, list[str]] = {}
            for k in p0:
                if not self.zero_grad(k):
                    groups.setdefault(self.group(k), []).append(k)
            self._fd = []
            for g, keys in groups.items():
                d = {k: rng.standard_normal(p0[k].shape) for k in keys}
                n = np.sqrt(sum(float(np.sum(v * v)) for v in d.values()))
                d = {k: v / n for k, v in d.items()}
                f = lambda s: self.ref_loss({**p0, **{k: p0[k] + s * d[k] for k in keys}})  # noqa: E731
                h = FD_H
                self._fd.append((g, d, (8 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12 * h)))
        return self._fd

    def grad_fd_err(self, grads: dict[str, np.ndarray]) -> tuple[float, str]:
        """Worst relative error of the directional derivatives <g, d> against the finite
        differences, relative to the size of <g, d> for a random unit d: ||g_group|| / sqrt(n)."""
        worst = (0.0, "")
        for g, d, fd in self.fd_directions():
            gg = {k: np.asarray(grads[k], np.float64) for k in d}
            dd = sum(float(np.sum(gg[k] * d[k])) for k in d)
            n = sum(v.size for v in d.values())
            scale = np.sqrt(sum(float(np.sum(v * v)) for v in gg.values()) / n)
            worst = max(worst, (abs(dd - fd) / scale if scale > 0 else abs(dd - fd), g))
        return worst

    def zero_grad_ok(self, grads: dict[str, np.ndarray]) -> bool:
        total = np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads.values()))
        return all(np.linalg.norm(grads[k]) <= 1e-6 * total for k in grads if self.zero_grad(k))

    def adamw_err(self, out: dict[str, Any]) -> tuple[float, str]:
        """The update p3 - p0 of 3 steps against numpy AdamW fed with the same gradients."""
        decay = [k for k, v in self.params.items() if self.decayed(k, v.shape)]
        ref = adamw_reference(self.params, out["grads_seq"], self.optimizer, decay, store=np.float32)
        p0 = {k: v.astype(np.float64) for k, v in self.params.items()}
        return max((rel_err(out["after3"][k] - p0[k], ref[k] - p0[k]), k) for k in p0)

    # -- checks ---------------------------------------------------------------------
    def check_export(self, name: str, mode: str) -> None:
        out = self.run(name, mode)["export"]
        assert set(out) == set(self.params)
        for k, v in self.params.items():
            assert out[k].dtype == np.float32 and out[k].shape == v.shape, k
            np.testing.assert_array_equal(out[k], v, err_msg=k)

    def check_forward_and_loss(self, name: str, mode: str, ref_forward: np.ndarray, ref_loss: float) -> None:
        out = self.run(name, mode)
        assert self.forward_err(out, ref_forward) <= tol("forward", self.name)
        assert self.loss_err(out, ref_loss) <= tol("loss", self.name)

    def check_grads(self, name: str, mode: str) -> None:
        grads = self.run(name, mode)["grads"]
        assert self.zero_grad_ok(grads), "gradients that vanish in exact arithmetic are not negligible"
        err, group = self.grad_fd_err(grads)
        assert err <= tol("grad_fd", self.name), f"gradient of {group}: relative error {err:.2e}"
        # all-zero gradients would agree with anything small: the gradients must be informative
        assert sum(np.linalg.norm(g) > 0 for g in grads.values()) >= 0.9 * len(grads)

    def check_adamw(self, name: str, mode: str) -> None:
        err, key = self.adamw_err(self.run(name, mode))
        assert err <= tol("adamw", self.name), f"{key} after {ADAM_STEPS} AdamW steps: relative error {err:.2e}"

    def check_loss_falls(self, name: str, mode: str) -> None:
        losses = self.run(name, mode)["losses"]
        assert len(losses) == STEPS and all(np.isfinite(losses))
        assert losses[-1] < self.loss_drop * losses[0], losses

    def check_agrees_with_eager(self, name: str, mode: str) -> None:
        assert mode != "eager", "compare a compiled or graph mode with eager"
        eager, out = self.run(name, "eager"), self.run(name, mode)
        assert rel_err(out["forward"], eager["forward"]) <= tol("mode_forward", self.name)
        err = max(rel_err(out["grads"][k], eager["grads"][k]) for k in eager["grads"] if not self.zero_grad(k))
        assert err <= tol("mode_grads", self.name)


# ----------------------------------------------------------------------------- the GPT, second order

def _ln_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    mu = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + gpt.LN_EPS)
    xhat = (x - mu) * rstd
    return xhat * w + b, (xhat, rstd, w)


def _ln_backward(dy: np.ndarray, cache: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dw, db) of y = xhat w + b, xhat = (x - mean) / sqrt(var + eps): the mean and the
    variance both differentiated."""
    xhat, rstd, w = cache
    dxhat = dy * w
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, w.size).sum(0), dy.reshape(-1, w.size).sum(0)


def _gelu_grad(x: np.ndarray) -> np.ndarray:
    c = math.sqrt(2.0 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)


def reference_gpt_grad(cfg: gpt.GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray,
                       targets: np.ndarray) -> dict[str, np.ndarray]:
    """The gradient of workloads.gpt.reference_loss (mean token cross-entropy), float64, by
    backpropagation written out in numpy (no framework, no autodiff): the forward of
    reference_logits keeping what the backward needs, then each layer's backward in reverse.
    Tested against central differences of the float64 loss (tests/test_gpt_equivalence.py)."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    B, T = tokens.shape
    nh, hs, C = cfg.n_head, cfg.head_size, cfg.n_embd
    heads = lambda z: z.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)          # noqa: E731  (B, T, C) -> (B, nh, T, hs)
    merge = lambda z: z.transpose(0, 2, 1, 3).reshape(B, T, C)              # noqa: E731
    causal = np.tril(np.ones((T, T), dtype=bool))
    x = p["wte.weight"][tokens] + p["wpe.weight"][:T]
    saved = []
    for i in range(cfg.n_layer):
        h = f"h.{i}."
        a, ln1 = _ln_forward(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        q, k, v = (heads(z) for z in np.split(a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"], 3, -1))
        att = np.where(causal, q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs), -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = merge(att @ v)
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m, ln2 = _ln_forward(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        pre = m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"]
        act = gpt.gelu_tanh(pre)
        x = x + act @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
        saved.append((a, ln1, q, k, v, att, y, m, ln2, pre, act))
    xf, lnf = _ln_forward(x, p["ln_f.weight"], p["ln_f.bias"])
    logits = xf @ p["wte.weight"].T
    prob = np.exp(logits - logits.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    dlogits = prob
    np.put_along_axis(dlogits, targets[..., None].astype(np.int64),
                      np.take_along_axis(prob, targets[..., None].astype(np.int64), -1) - 1.0, -1)
    dlogits /= B * T
    g = {k: np.zeros_like(v) for k, v in p.items()}
    rows = lambda z: z.reshape(B * T, -1)                                   # noqa: E731
    g["wte.weight"] += rows(dlogits).T @ rows(xf)                           # the tied head
    dx, g["ln_f.weight"], g["ln_f.bias"] = _ln_backward(dlogits @ p["wte.weight"], lnf)
    for i in reversed(range(cfg.n_layer)):
        h = f"h.{i}."
        a, ln1, q, k, v, att, y, m, ln2, pre, act = saved[i]
        g[h + "mlp.c_proj.weight"], g[h + "mlp.c_proj.bias"] = rows(act).T @ rows(dx), rows(dx).sum(0)
        dpre = (dx @ p[h + "mlp.c_proj.weight"].T) * _gelu_grad(pre)
        g[h + "mlp.c_fc.weight"], g[h + "mlp.c_fc.bias"] = rows(m).T @ rows(dpre), rows(dpre).sum(0)
        dln, g[h + "ln_2.weight"], g[h + "ln_2.bias"] = _ln_backward(dpre @ p[h + "mlp.c_fc.weight"].T, ln2)
        dx = dx + dln
        g[h + "attn.c_proj.weight"], g[h + "attn.c_proj.bias"] = rows(y).T @ rows(dx), rows(dx).sum(0)
        dy = heads(dx @ p[h + "attn.c_proj.weight"].T)
        datt = dy @ v.transpose(0, 1, 3, 2)
        dv = att.transpose(0, 1, 3, 2) @ dy
        ds = att * (datt - (datt * att).sum(-1, keepdims=True)) / math.sqrt(hs)
        dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
        dqkv = np.concatenate([merge(dq), merge(dk), merge(dv)], -1)
        g[h + "attn.c_attn.weight"], g[h + "attn.c_attn.bias"] = rows(a).T @ rows(dqkv), rows(dqkv).sum(0)
        dln, g[h + "ln_1.weight"], g[h + "ln_1.bias"] = _ln_backward(dqkv @ p[h + "attn.c_attn.weight"].T, ln1)
        dx = dx + dln
    np.add.at(g["wte.weight"], tokens.reshape(-1), rows(dx))
    g["wpe.weight"][:T] += dx.sum(0)
    return g


def reference_gpt_hvp(cfg: gpt.GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray, targets: np.ndarray,
                      v: dict[str, np.ndarray], h: float = FD_H) -> dict[str, np.ndarray]:
    """H v of the mean loss, float64, every tensor: the 4th-order central difference of
    reference_gpt_grad along v / |v| (step h), times |v|."""
    p0 = {k: np.asarray(a, np.float64) for k, a in params.items()}
    norm = math.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in v.values()))
    w = {k: np.asarray(a, np.float64) / norm for k, a in v.items()}
    grad = lambda s: reference_gpt_grad(cfg, {k: p0[k] + s * w[k] for k in p0}, tokens, targets)  # noqa: E731
    g1, g_1, g2, g_2 = grad(h), grad(-h), grad(2 * h), grad(-2 * h)
    return {k: norm * (8 * (g1[k] - g_1[k]) - (g2[k] - g_2[k])) / (12 * h) for k in p0}


def gpt_hvp(name: str, mode: str, cfg: gpt.GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray,
            targets: np.ndarray, v: dict[str, np.ndarray], strategy: str) -> dict[str, np.ndarray]:
    """H v of the GPT's mean loss computed by a framework: its frameworks/<fw>/gpt.py (the model
    of these tests) differentiated twice by its own transforms, through the derivatives
    workload's hvp_gpt (`strategy` fwd_rev or rev_rev) with these parameters as member 0."""
    from workloads import derivatives
    fw = frameworks.load(name)
    T, B = tokens.shape[1], tokens.shape[0]
    presets = [n for n, pr in gpt.PRESETS.items() if pr.config == cfg]
    dcfg = dataclasses.replace(derivatives.preset("tiny").config, gpt=presets[0], gpt_seq=T, gpt_hvp_batch=B,
                               ensemble_models=(1,))
    model = fw.build("derivatives", dcfg, {f"m0.{k}": a for k, a in params.items()}, mode, DEVICE, strategy=strategy)
    arrays = [tokens, targets, *(v[k] for k in gpt.param_shapes(cfg))]
    return fw.to_numpy(model.hvp_gpt(*(fw.asarray(a, DEVICE) for a in arrays)))


def hvp_err(out: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> tuple[float, str]:
    """The worst relative error over the tensors, and which."""
    assert set(out) == set(ref), sorted(set(out) ^ set(ref))
    return max((rel_err(np.asarray(out[k], np.float64), ref[k]), k) for k in ref)
