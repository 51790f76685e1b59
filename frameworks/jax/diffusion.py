"""DDPM's UNet in JAX: pure functions of a parameter pytree, behind fwbench's DiffusionModel.

The parameters are a flat dict keyed by the names of workloads/diffusion.py (a dict is a
pytree), each a float32 jax.Array in the numpy layout: convs HWIO (kh, kw, in, out), dense
layers (in, out). JAX computes in NHWC with HWIO kernels natively
(lax.conv_general_dilated with dimension_numbers ("NHWC", "HWIO", "NHWC")), so loading is
one device_put per array with no transposes, gradients come out under the numpy names in
the numpy layout, and exporting copies the arrays back bit for bit.

The model is pure functions, `eps(params, x, t)` (the denoiser eps_theta) and
`loss(params, x0, t, noise)` (Algorithm 1); gradients are `jax.value_and_grad(loss)`;
AdamW with gradient clipping is optax, built as frameworks/jax/gpt.py builds it.
Attention is jax.nn.dot_product_attention with one head of width C, whose default scale
1/sqrt(head width) is the spec's C**-0.5.

Precision (workloads/precision.py): `compute`, the dtype of the products' inputs, is a static
argument of the model functions, float32 by default (unchanged), chosen once in JaxDiffusion
from JAX's dtype table (frameworks/jax/precision.py: COMPUTE). The convolutions, the dense
layers and the attention go through that module's `conv`, `matmul` and `attention`: at bf16
the parameters, gradients and optax state stay float32 and bf16 enters only at the products'
inputs, forward and backward (custom_vjp: the float32 cotangent rounded to bf16), their
results float32 (the attention written out, or cuDNN's on a CUDA GPU: softmax float32).
GroupNorm, SiLU, the timestep embedding, the loss and the sampler's arithmetic are float32
in both.

Modes: "eager" calls the functions as they are, so JAX dispatches every operation (of the
forward, the backward, the optimizer update and every sampler step) one at a time; nothing
is wrapped in jax.jit. "compiled" wraps each timed entry point in one jax.jit: the
denoiser, the loss, the gradient, the whole training step (gradient, clipping and AdamW in
one program that donates the old parameters and optimizer state, so XLA updates them in
place), and the whole sampling loop: lax.scan over the per-step timesteps, coefficients
and noise, with the UNet as the scan body, so a sample of any number of steps is one XLA
program launched once (compiled once per method and step count, since those fix the scanned
arrays' shapes), with no Python or dispatch between steps.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from frameworks.jax import precision as P
from frameworks.jax.optim import adamw
from frameworks.jax.precision import F32, attention, matmul
from workloads import diffusion as D
from workloads.base import Model, attn_scale
from workloads.case import Case

# Module-level names the model reads at trace (or eager call) time, so that a test can patch
# this framework's copy alone (tests/test_mutations.py).
from workloads.diffusion import GN_EPS, OPTIMIZER, sampler_coefficients

Params = dict[str, jax.Array]
PRECISIONS = P.PRECISIONS  # the policies build honours: JAX's dtype table's (frameworks/jax/precision.py)


# ----------------------------------------------------------------------------- layers

def group_norm(x: jax.Array, w: jax.Array, b: jax.Array, groups: int) -> jax.Array:
    """(x - mean) / sqrt(var + 1e-6) * w + b, mean and biased variance over (H, W, the
    channels of the group), groups being contiguous blocks of C / groups channels."""
    B, H, W, C = x.shape
    g = x.reshape(B, H, W, groups, C // groups)                           # (B, H, W, G, C/G)
    mu = g.mean(axis=(1, 2, 4), keepdims=True)                            # (B, 1, 1, G, 1)
    var = jnp.square(g - mu).mean(axis=(1, 2, 4), keepdims=True)
    g = (g - mu) * lax.rsqrt(var + GN_EPS)
    return g.reshape(B, H, W, C) * w + b


def norm(p: Params, name: str, x: jax.Array, groups: int) -> jax.Array:
    """The GroupNorm whose parameters are `name`.weight and `name`.bias."""
    return group_norm(x, p[name + ".weight"], p[name + ".bias"], groups)


def conv(p: Params, name: str, x: jax.Array, stride: int = 1, compute: Any = F32) -> jax.Array:
    """Cross-correlation of NHWC x with the HWIO kernel `name.weight`, zero padding (k-1)/2
    on every side (1 for 3x3 convs, the stride-2 downsample too; 0 for 1x1), plus bias."""
    w = p[name + ".weight"]                                               # (k, k, Cin, Cout)
    return P.conv(x, w, stride, w.shape[0] // 2, compute) + p[name + ".bias"]  # (B, Ho, Wo, Cout)


def dense(p: Params, name: str, x: jax.Array, compute: Any = F32) -> jax.Array:
    return matmul(x, p[name + ".weight"], compute) + p[name + ".bias"]


def timestep_embedding(t: jax.Array, freqs: Any) -> jax.Array:
    """DDPM's get_timestep_embedding in float32: (B,) -> (B, dim), [sin(t f), cos(t f)],
    f_k = exp(-log(10000) k / (dim/2 - 1)). The frequencies are constants of the config,
    taken from numpy float64 and rounded once to float32, so no framework's float32 exp
    can make them differ by an ulp."""
    arg = t.astype(jnp.float32)[:, None] * freqs[None, :]                 # (B, half)
    return jnp.concatenate([jnp.sin(arg), jnp.cos(arg)], axis=1)          # (B, dim)


# ----------------------------------------------------------------------------- blocks

def resnet_block(p: Params, name: str, x: jax.Array, temb: jax.Array, groups: int,
                 compute: Any = F32) -> jax.Array:
    """shortcut(x) + conv2(SiLU(GN2(conv1(SiLU(GN1(x))) + temb_proj(SiLU(temb)))))."""
    h = conv(p, name + ".conv1", jax.nn.silu(norm(p, name + ".norm1", x, groups)), compute=compute)
    h = h + dense(p, name + ".temb_proj", jax.nn.silu(temb), compute)[:, None, None, :]  # (B, 1, 1, Cout)
    h = conv(p, name + ".conv2", jax.nn.silu(norm(p, name + ".norm2", h, groups)), compute=compute)
    if name + ".nin_shortcut.weight" in p:  # widths differ: a 1x1 conv matches them
        x = conv(p, name + ".nin_shortcut", x, compute=compute)
    return x + h


def attn_block(p: Params, name: str, x: jax.Array, groups: int, compute: Any = F32) -> jax.Array:
    """x + proj_out(softmax(q k^T * C**-0.5) v): one head over all H*W positions."""
    B, H, W, C = x.shape
    h = norm(p, name + ".norm", x, groups)
    q, k, v = (conv(p, f"{name}.{n}", h, compute=compute).reshape(B, H * W, 1, C)
               for n in ("q", "k", "v"))                                  # (B, N, 1, C)
    h = attention(q, k, v, attn_scale(C), compute)                        # (B, N, 1, C)
    return x + conv(p, name + ".proj_out", h.reshape(B, H, W, C), compute=compute)


def upsample(p: Params, name: str, x: jax.Array, compute: Any = F32) -> jax.Array:
    """Nearest-neighbour x2, then a 3x3 conv."""
    x = jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)                   # (B, 2H, 2W, C)
    return conv(p, name + ".conv", x, compute=compute)


# ----------------------------------------------------------------------------- the UNet

def eps(p: Params, x: jax.Array, t: jax.Array, *, cfg: D.DiffusionConfig, compute: Any = F32) -> jax.Array:
    """eps_theta(x_t, t): x (B, S, S, in_channels) float32, t (B,) int32 -> like x."""
    G, L = cfg.num_groups, len(cfg.ch_mult)
    freqs = D.timestep_frequencies(cfg.ch).astype(np.float32)
    temb = dense(p, "temb.dense.0", timestep_embedding(t, freqs), compute)             # (B, 4ch)
    temb = dense(p, "temb.dense.1", jax.nn.silu(temb), compute)
    hs = [conv(p, "conv_in", x, compute=compute)]                     # (B, S, S, ch): the skip stack
    for i in range(L):  # unrolled: the level structure is static and XLA fuses across blocks
        for j in range(cfg.num_res_blocks):
            h = resnet_block(p, f"down.{i}.block.{j}", hs[-1], temb, G, compute)
            # attention where the parameters have it (the levels at attn_resolutions at the
            # config's size): the same model at any resolution (workloads.dynamic's ddpm stream)
            if f"down.{i}.attn.{j}.q.weight" in p:
                h = attn_block(p, f"down.{i}.attn.{j}", h, G, compute)
            hs.append(h)
        if i != L - 1:
            hs.append(conv(p, f"down.{i}.downsample.conv", hs[-1], stride=2, compute=compute))  # (B, H/2, W/2, C)
    h = hs[-1]
    h = resnet_block(p, "mid.block_1", h, temb, G, compute)
    h = attn_block(p, "mid.attn_1", h, G, compute)
    h = resnet_block(p, "mid.block_2", h, temb, G, compute)
    for i in reversed(range(L)):
        for j in range(cfg.num_res_blocks + 1):
            h = jnp.concatenate([h, hs.pop()], axis=-1)                   # h first, then the skip
            h = resnet_block(p, f"up.{i}.block.{j}", h, temb, G, compute)
            if f"up.{i}.attn.{j}.q.weight" in p:
                h = attn_block(p, f"up.{i}.attn.{j}", h, G, compute)
        if i != 0:
            h = upsample(p, f"up.{i}.upsample", h, compute)
    assert not hs
    h = jax.nn.silu(norm(p, "norm_out", h, G))
    return conv(p, "conv_out", h, compute=compute)                    # (B, S, S, in_channels)


def loss(p: Params, x0: jax.Array, t: jax.Array, noise: jax.Array, *, cfg: D.DiffusionConfig,
         sched: dict[str, jax.Array], compute: Any = F32) -> jax.Array:
    """Algorithm 1: mean((noise - eps_theta(x_t, t))^2) over every element, with
    x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise (eq. 4), coefficients float32."""
    a = sched["sqrt_alphas_cumprod"][t][:, None, None, None]              # (B, 1, 1, 1)
    s = sched["sqrt_one_minus_alphas_cumprod"][t][:, None, None, None]
    x_t = a * x0 + s * noise
    return jnp.mean(jnp.square(noise - eps(p, x_t, t, cfg=cfg, compute=compute)))


# ----------------------------------------------------------------------------- training

def train_step(p: Params, opt_state: Any, x0: jax.Array, t: jax.Array, noise: jax.Array, *,
               cfg: D.DiffusionConfig, sched: dict[str, jax.Array],
               tx: optax.GradientTransformation, compute: Any = F32) -> tuple[Params, Any, jax.Array]:
    """One optimizer step; returns the new parameters and state, and the loss before the step."""
    loss_value, grads = jax.value_and_grad(loss)(p, x0, t, noise, cfg=cfg, sched=sched, compute=compute)
    updates, opt_state = tx.update(grads, opt_state, p)
    return optax.apply_updates(p, updates), opt_state, loss_value


# ----------------------------------------------------------------------------- sampling

def python_scan(body: Callable[[Any, Any], tuple[Any, Any]], carry: Any, xs: Any) -> tuple[Any, None]:
    """lax.scan's meaning as a Python loop, for eager mode: each step's operations are
    dispatched as they come (lax.scan outside jit would compile the whole loop)."""
    for s in range(len(jax.tree.leaves(xs)[0])):
        carry, _ = body(carry, jax.tree.map(lambda a: a[s], xs))
    return carry, None


def sample_loop(p: Params, x: jax.Array, coefs: dict[str, jax.Array], noise: jax.Array | None, *,
                cfg: D.DiffusionConfig, scan: Callable, compute: Any = F32) -> jax.Array:
    """The sampler as one linear update per step (workloads.diffusion.sampler_coefficients):
    x <- a[s] x + b[s] eps_theta(x, t[s]) + c[s] z[s], s = 0 .. S-1, from x = x_T (B, H, W, C).
    coefs: t (S,) int32, a, b, c (S,) float32; noise z (S, B, H, W, C) or None (DDIM, c = 0)."""
    B = x.shape[0]

    def step(x: jax.Array, s: tuple[jax.Array, ...]) -> tuple[jax.Array, None]:
        t_s, a, b, c, z = s
        x = a * x + b * eps(p, x, jnp.full((B,), t_s, jnp.int32), cfg=cfg, compute=compute)
        if z is not None:  # a static choice: None is an empty pytree, so DDIM scans no noise
            x = x + c * z
        return x, None

    x, _ = scan(step, x, (coefs["t"], coefs["a"], coefs["b"], coefs["c"], noise))
    return x


# ----------------------------------------------------------------------------- interface

def build(adapter: Any, config: D.DiffusionConfig, params: dict[str, np.ndarray], case: Case) -> JaxDiffusion:
    return JaxDiffusion(adapter, config, params, case)


class JaxDiffusion(Model):
    """workloads.diffusion.DiffusionModel for JAX: the parameters and optimizer state
    (replaced by every train_step) and the entry points the benchmarks time."""

    def __init__(self, adapter: Any, config: D.DiffusionConfig, params: dict[str, np.ndarray], case: Case) -> None:
        D.check_params(config, params)
        mode, device, compute = case.mode, case.device, P.COMPUTE[case.precision]
        self.config, self.mode, self.device, self.precision = config, mode, device, case.precision
        self.adapter = adapter
        self.params = {k: adapter.asarray(params[k], device) for k in D.param_shapes(config)}
        self.tx = adamw(params, OPTIMIZER, D.decayed)
        # optax creates its zeros on the default device: put the state beside the params.
        self.opt_state = jax.device_put(self.tx.init(self.params), adapter.jax_device(device))
        sch = config.schedule  # the loss's coefficients, float64 -> float32 once
        sched = {k: adapter.asarray(getattr(sch, k).astype(np.float32), device)
                 for k in ("sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod")}
        self._coefs: dict[tuple[str, int], dict[str, jax.Array]] = {}

        compiled = mode == "compiled"
        jit = jax.jit if compiled else (lambda f, **kw: f)
        scan = lax.scan if compiled else python_scan
        self._eps = jit(partial(eps, cfg=config, compute=compute))
        self._loss = jit(partial(loss, cfg=config, sched=sched, compute=compute))
        # the loss the gradient programs differentiate (params, x0, t, noise), declared for the
        # data-parallel steps that differentiate it themselves (frameworks/jax/parallel.py)
        self.train_loss = partial(loss, cfg=config, sched=sched, compute=compute)
        self._grads = jit(jax.grad(self.train_loss))
        # Donation lets XLA write the new parameters and moments into the old buffers.
        # the pure step (params, opt_state, x0, t, noise -> params, opt_state, loss), declared for
        # the data-parallel steps that place it (frameworks/jax/parallel.py)
        self.pure_step = partial(train_step, cfg=config, sched=sched, tx=self.tx, compute=compute)
        self._train_step = jit(self.pure_step, donate_argnums=(0, 1))
        self._sample = jit(partial(sample_loop, cfg=config, scan=scan, compute=compute))

    def _sampler(self, method: str, steps: int) -> dict[str, jax.Array]:
        """sampler_coefficients cast to float32 on the device, made once per (method, steps)."""
        key = (method, steps)
        if key not in self._coefs:
            c = sampler_coefficients(self.config.schedule, method, steps)  # checks both
            self._coefs[key] = {"t": self.adapter.asarray(c["t"].astype(np.int32), self.device),
                                **{k: self.adapter.asarray(c[k].astype(np.float32), self.device)
                                   for k in ("a", "b", "c")}}
        return self._coefs[key]

    # -- DiffusionModel ------------------------------------------------------------------
    def eps(self, x: jax.Array, t: jax.Array) -> jax.Array:
        return self._eps(self.params, x, t)

    def loss(self, x0: jax.Array, t: jax.Array, noise: jax.Array) -> jax.Array:
        return self._loss(self.params, x0, t, noise)

    def grads(self, x0: jax.Array, t: jax.Array, noise: jax.Array) -> dict[str, jax.Array]:
        return self._grads(self.params, x0, t, noise)

    def state(self) -> Any:
        """What train_step replaces: the harness waits for these too, since JAX dispatches
        asynchronously and the loss can be ready before the update is."""
        return self.params, self.opt_state

    def train_step(self, x0: jax.Array, t: jax.Array, noise: jax.Array) -> jax.Array:
        self.params, self.opt_state, loss_value = self._train_step(self.params, self.opt_state, x0, t, noise)
        return loss_value  # a jax.Array: reading its value would wait for the step

    def sample(self, x_T: jax.Array, noise: jax.Array | None = None, *, method: str = "ddim",
               steps: int = D.SAMPLE_STEPS) -> jax.Array:
        coefs = self._sampler(method, steps)
        # DDIM's c is 0 at every step: it scans no noise, whatever the caller passed.
        return self._sample(self.params, x_T, coefs, noise if method == "ddpm" else None)

    def export_params(self) -> dict[str, np.ndarray]:
        # Copies: the next train_step donates these buffers to XLA.
        return {k: np.array(self.params[k]) for k in D.param_shapes(self.config)}
