"""The DDPM UNet (Ho et al. 2020) in low-level TensorFlow 2: tf.Modules holding tf.Variables,
ops from tf.nn, gradients from tf.GradientTape. Same maths as workloads/diffusion.py, whose
reference_eps this file follows top-down: Dense, Conv2d, GroupNorm, ResnetBlock, AttnBlock,
Downsample, Upsample, UNet (the denoiser), then TFDiffusion (the process: loss, AdamW step,
samplers) that fwbench calls.

Layout: NHWC throughout, TF's native one, with HWIO filters for tf.nn.conv2d and (in, out)
dense weights: exactly the numpy dict's layout, so parameters load and export as plain
copies (bit-exact round trip). Every 3x3 conv, the stride-2 Downsample too, pads 1 pixel
on each side explicitly ([[0,0],[1,1],[1,1],[0,0]]): "SAME" would pad a stride-2 conv of
an even-sized input by 0 before and 1 after, which is not the workload's maths.

Modes (frameworks/tensorflow/__init__.py): eager runs op by op; graph and compiled wrap
every timed entry point in one tf.function (compiled: jit_compile=True, so each is one XLA
program), made through the adapter so its traces are counted:
    eps          the UNet forward
    loss, grads  Algorithm 1's loss, and the loss with every gradient
    train_step   loss, gradients, clipping and the AdamW update, one function
    sample       the whole sampling loop: one tf.while_loop whose body is one UNet call
                 and the linear update x <- a x + b eps + c z (an XLA While in compiled
                 mode). A while_loop rather than a Python loop that AutoGraph would unroll:
                 the graph holds one UNet, not `steps` copies (a 10x larger trace and XLA
                 compile), and the step count and coefficients are tensors, so one trace
                 serves every sampler and step count. Its input_signature fixes H, W, C
                 and leaves the batch and step count open: it never retraces.
The other functions use reduce_retracing=True as gpt.py does: the first trace keeps static
shapes, a later new shape makes one generalised trace instead of one per shape.

SiLU is tf.nn.silu, TF's own op. Its custom gradient recomputes sigmoid(x) and also computes
the gradient of its `beta` argument (a reduction nobody asks for): graph and XLA prune it,
eager runs it (about 20% of an eager step at the tiny preset against x * sigmoid(x)).

Precision (workloads/precision.py, as gpt.py): every layer holds `compute`, the dtype of its
products' inputs (frameworks/tensorflow/precision.py: COMPUTE[precision]). With bfloat16 the
convolutions (precision.conv), the dense layers (gpt's Linear) and the attention's q k^T and
p v (precision.attention) cast their inputs to bfloat16 and their results back to float32;
the timestep embedding, GroupNorm, SiLU, softmax, the bias adds, the loss, AdamW and the
samplers' updates stay float32, and so do the variables and their gradients. float32 leaves
the fp32 graph as it was.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from frameworks.tensorflow import precision as P
from frameworks.tensorflow.gpt import Linear, dims, variable
from frameworks.tensorflow.optim import AdamWUpdate
from workloads.base import Model, attn_scale
from workloads.case import Case

# GN_EPS, OPTIMIZER, sampler_coefficients, attn_scale and the primitives below are module-level
# names the model reads, so that a test can patch this framework's copy alone.
from workloads.diffusion import (
    GN_EPS,
    OPTIMIZER,
    SAMPLE_STEPS,
    DiffusionConfig,
    check_params,
    decayed,
    sampler_coefficients,
    timestep_frequencies,
    unet_blocks,
)

PRECISIONS = P.PRECISIONS   # the policies build honours: TensorFlow's dtype table's (precision.py)

# y = x @ W + b with W (in, out), x (B, in): the GPT's linear layer is the same layer.
Dense = Linear


class Conv2d(tf.Module):
    """Cross-correlation of NHWC x with the HWIO filter (k, k, Cin, Cout), zero padding
    (k-1)/2 on every side given explicitly, then the bias (float32)."""

    def __init__(self, params, prefix, named, stride=1, compute=tf.float32):
        super().__init__()
        self.weight = variable(params, prefix + ".weight", named)
        self.bias = variable(params, prefix + ".bias", named)
        self.stride = stride
        self.compute = compute
        p = self.weight.shape[0] // 2
        self.padding = [[0, 0], [p, p], [p, p], [0, 0]] if p else "VALID"

    def __call__(self, x):
        y = P.conv(x, self.weight, self.compute, strides=self.stride, padding=self.padding)
        return tf.nn.bias_add(y, self.bias)                              # (B, H/stride, W/stride, Cout)


def group_norm(x, w, b, groups):
    _, H, W, C = dims(x)   # static where known; H, W dynamic under an input_signature with None
    g = tf.reshape(x, (-1, H, W, groups, C // groups))                   # (B, H, W, G, C/G)
    mean, var = tf.nn.moments(g, axes=[1, 2, 4], keepdims=True)          # (B, 1, 1, G, 1)
    g = (g - mean) * tf.math.rsqrt(var + GN_EPS)
    return tf.reshape(g, (-1, H, W, C)) * w + b                          # (B, H, W, C)


class GroupNorm(tf.Module):
    """(x - mean) / sqrt(var + 1e-6) over (H, W, channels of the group), biased variance,
    groups of C/G contiguous channels, then a per-channel affine. Written out: Keras 3's
    GroupNormalization is a layer, not an op, and tf.nn has none."""

    def __init__(self, params, prefix, named, groups):
        super().__init__()
        self.weight = variable(params, prefix + ".weight", named)
        self.bias = variable(params, prefix + ".bias", named)
        self.groups = groups

    def __call__(self, x):
        return group_norm(x, self.weight, self.bias, self.groups)


class ResnetBlock(tf.Module):
    """shortcut(x) + conv2(SiLU(GN2(conv1(SiLU(GN1(x))) + temb_proj(SiLU(temb))))), the
    shortcut a 1x1 conv where the widths differ. Takes SiLU(temb), computed once by UNet."""

    def __init__(self, params, prefix, named, groups, cin, cout, compute=tf.float32):
        super().__init__()
        self.norm1 = GroupNorm(params, prefix + ".norm1", named, groups)
        self.conv1 = Conv2d(params, prefix + ".conv1", named, compute=compute)
        self.temb_proj = Dense(params, prefix + ".temb_proj", named, compute)
        self.norm2 = GroupNorm(params, prefix + ".norm2", named, groups)
        self.conv2 = Conv2d(params, prefix + ".conv2", named, compute=compute)
        self.nin_shortcut = (Conv2d(params, prefix + ".nin_shortcut", named, compute=compute)
                             if cin != cout else None)

    def __call__(self, x, silu_temb):
        h = self.conv1(tf.nn.silu(self.norm1(x)))                        # (B, H, W, Cout)
        h = h + self.temb_proj(silu_temb)[:, None, None, :]              # + (B, 1, 1, Cout)
        h = self.conv2(tf.nn.silu(self.norm2(h)))
        if self.nin_shortcut is not None:
            x = self.nin_shortcut(x)
        return x + h


class AttnBlock(tf.Module):
    """x + proj_out(softmax(q k^T C**-0.5) v), one head over all H*W positions, q, k, v
    1x1 convs of GN(x). TF has no fused attention op: scores and softmax are explicit."""

    def __init__(self, params, prefix, named, groups, compute=tf.float32):
        super().__init__()
        self.norm = GroupNorm(params, prefix + ".norm", named, groups)
        self.q = Conv2d(params, prefix + ".q", named, compute=compute)
        self.k = Conv2d(params, prefix + ".k", named, compute=compute)
        self.v = Conv2d(params, prefix + ".v", named, compute=compute)
        self.proj_out = Conv2d(params, prefix + ".proj_out", named, compute=compute)
        self.compute = compute

    def __call__(self, x):
        _, H, W, C = dims(x)
        h = self.norm(x)
        q, k, v = (tf.reshape(f(h), (-1, H * W, C)) for f in (self.q, self.k, self.v))  # (B, N, C)
        h = P.attention(q, k, v, attn_scale(C), self.compute)            # (B, N, C): softmax over the keys
        h = tf.reshape(h, (-1, H, W, C))                                 # (B, H, W, C)
        return x + self.proj_out(h)


class Downsample(tf.Module):
    """conv3x3 with stride 2 (symmetric padding 1): (B, H, W, C) -> (B, H/2, W/2, C)."""

    def __init__(self, params, prefix, named, compute=tf.float32):
        super().__init__()
        self.conv = Conv2d(params, prefix + ".conv", named, stride=2, compute=compute)

    def __call__(self, x):
        return self.conv(x)


class Upsample(tf.Module):
    """conv3x3 of the nearest-neighbour x2 upsampling: (B, H, W, C) -> (B, 2H, 2W, C)."""

    def __init__(self, params, prefix, named, compute=tf.float32):
        super().__init__()
        self.conv = Conv2d(params, prefix + ".conv", named, compute=compute)

    def __call__(self, x):
        B, H, W, C = dims(x)
        # each pixel copied into a 2x2 block: one broadcast and a reshape (tf.repeat is a
        # dozen small ops per axis when eager)
        x = tf.broadcast_to(x[:, :, None, :, None, :], (B, H, 2, W, 2, C))  # (B, H, 2, W, 2, C)
        return self.conv(tf.reshape(x, (B, 2 * H, 2 * W, C)))              # conv of (B, 2H, 2W, C)


def timestep_embedding(t, freqs):
    """DDPM's get_timestep_embedding: t (B,) int32 -> [sin(t f), cos(t f)] (B, ch), from t
    cast to float32; freqs (ch/2,) float32."""
    arg = tf.cast(t, tf.float32)[:, None] * freqs[None, :]               # (B, ch/2)
    return tf.concat([tf.sin(arg), tf.cos(arg)], axis=1)                 # (B, ch)


class UNet(tf.Module):
    """The denoiser eps_theta(x, t). Its blocks are made from workloads.diffusion.unet_blocks
    (the list param_shapes reads, so widths cannot drift from the parameter spec) and kept
    under their checkpoint names; __call__ walks them as reference_eps does. `named` maps
    each parameter name to its tf.Variable, in the numpy dict's (forward) order. `compute`:
    the dtype of every product's inputs (float32, or bfloat16 for the bf16 policy)."""

    def __init__(self, config: DiffusionConfig, params: dict[str, np.ndarray], compute=tf.float32):
        super().__init__(name="unet")
        self.config = config
        self.named: dict[str, tf.Variable] = {}
        G, named, c = config.num_groups, self.named, compute
        make = {
            "dense": lambda b: Dense(params, b.name, named, c),
            "conv": lambda b: Conv2d(params, b.name, named, compute=c),
            "norm": lambda b: GroupNorm(params, b.name, named, G),
            "resnet": lambda b: ResnetBlock(params, b.name, named, G, b.cin, b.cout, c),
            "attn": lambda b: AttnBlock(params, b.name, named, G, c),
            "downsample": lambda b: Downsample(params, b.name, named, c),
            "upsample": lambda b: Upsample(params, b.name, named, c),
        }
        self.blocks = {b.name: make[b.kind](b) for b in unet_blocks(config)}
        self.freqs = tf.constant(timestep_frequencies(config.ch), tf.float32)   # rounded once

    def __call__(self, x, t):
        """x (B, H, W, C) float32, t (B,) int32 -> eps (B, H, W, C) float32."""
        cfg, m, L = self.config, self.blocks, len(self.config.ch_mult)
        temb = timestep_embedding(t, self.freqs)                         # (B, ch)
        temb = m["temb.dense.1"](tf.nn.silu(m["temb.dense.0"](temb)))    # (B, 4ch)
        temb = tf.nn.silu(temb)   # every ResnetBlock's temb_proj reads SiLU(temb): once, here
        hs = [m["conv_in"](x)]                                           # (B, S, S, ch)
        for i in range(L):
            for j in range(cfg.num_res_blocks):
                h = m[f"down.{i}.block.{j}"](hs[-1], temb)
                if f"down.{i}.attn.{j}" in m:
                    h = m[f"down.{i}.attn.{j}"](h)
                hs.append(h)
            if i != L - 1:
                hs.append(m[f"down.{i}.downsample"](hs[-1]))             # (B, H/2, W/2, C)
        h = hs[-1]
        h = m["mid.block_1"](h, temb)
        h = m["mid.attn_1"](h)
        h = m["mid.block_2"](h, temb)
        for i in reversed(range(L)):
            for j in range(cfg.num_res_blocks + 1):
                h = m[f"up.{i}.block.{j}"](tf.concat([h, hs.pop()], axis=-1), temb)  # h, then skip
                if f"up.{i}.attn.{j}" in m:
                    h = m[f"up.{i}.attn.{j}"](h)
            if i != 0:
                h = m[f"up.{i}.upsample"](h)                             # (B, 2H, 2W, C)
        assert not hs
        h = tf.nn.silu(m["norm_out"](h))
        return m["conv_out"](h)                                          # (B, S, S, in_channels)


class TFDiffusion(Model):
    """fwbench's DiffusionModel in TensorFlow: the process around the UNet (Algorithm 1's
    loss, the AdamW step, the samplers), each entry point one tf.function outside eager
    mode (see the module docstring)."""

    def __init__(self, adapter: Any, config: DiffusionConfig, params: dict[str, np.ndarray], case: Case) -> None:
        check_params(config, params)
        mode, device = case.mode, case.device
        self.adapter, self.config, self.mode, self.device = adapter, config, mode, device
        self._device = adapter.tf_device(device)
        self._place = adapter.placement(device)
        sched = config.schedule
        with self._place:
            self.net = UNet(config, params, P.COMPUTE[case.precision])
            # gpt.py's AdamW (torch's update, nanoGPT's clipping); its decay rule (2-D and
            # up) is workloads.diffusion.decayed's, and weight_decay is 0 here anyway
            self.optimizer = AdamWUpdate(self.net.named, OPTIMIZER, decayed)
            # q(x_t | x_0)'s coefficients, float64 -> float32 once
            self._sqrt_ac = tf.constant(sched.sqrt_alphas_cumprod, tf.float32)             # (T,)
            self._sqrt_1m_ac = tf.constant(sched.sqrt_one_minus_alphas_cumprod, tf.float32)
        self._vars = list(self.net.named.values())
        self._samplers: dict[tuple[str, int], tuple[Any, ...]] = {}

        def fn(f, **kwargs):
            if mode == "eager":
                return f
            return adapter.function(f, jit_compile=mode == "compiled", **kwargs)

        self._eps = fn(self.net.__call__, reduce_retracing=True)
        self._loss = fn(self._loss_fn, reduce_retracing=True)
        self._grads = fn(self._grads_fn, reduce_retracing=True)
        self._train_step = fn(self._train_step_fn, reduce_retracing=True)
        S, C = config.image_size, config.in_channels
        x = tf.TensorSpec((None, S, S, C), tf.float32)                   # (B, S, S, C)
        coef = tf.TensorSpec((None,), tf.float32)                        # (steps,)
        t = tf.TensorSpec((None,), tf.int32)
        z = tf.TensorSpec((None, None, S, S, C), tf.float32)             # (steps, B, S, S, C)
        self._sample = fn(self._sample_deterministic, input_signature=(x, t, coef, coef))
        self._sample_noisy = fn(self._sample_stochastic, input_signature=(x, t, coef, coef, coef, z))

    # -- training --------------------------------------------------------------------
    def _loss_fn(self, x0, t, noise):
        """Algorithm 1: mean((noise - eps(x_t, t))^2), x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise."""
        a = tf.gather(self._sqrt_ac, t)[:, None, None, None]             # (B, 1, 1, 1)
        s = tf.gather(self._sqrt_1m_ac, t)[:, None, None, None]
        eps = self.net(a * x0 + s * noise, t)                            # (B, H, W, C)
        return tf.reduce_mean(tf.square(noise - eps))

    def _grads_fn(self, x0, t, noise):
        with tf.GradientTape() as tape:
            loss = self._loss_fn(x0, t, noise)
        return loss, tape.gradient(loss, self._vars)

    def _train_step_fn(self, x0, t, noise):
        loss, grads = self._grads_fn(x0, t, noise)
        self.optimizer(self._vars, grads)
        return loss

    # -- sampling ----------------------------------------------------------------------
    def _sample_loop(self, x, t, a, b, c=None, noise=None):
        """x <- a[s] x + b[s] eps(x, t[s]) [+ c[s] noise[s]] for s = 0 .. steps-1, one
        tf.while_loop (a Python loop when eager, one XLA While when compiled)."""
        B = tf.shape(x)[0]

        def step(s, x):
            eps = self.net(x, tf.fill([B], t[s]))                        # (B, H, W, C)
            x = a[s] * x + b[s] * eps
            if noise is not None:
                x = x + c[s] * noise[s]
            return s + 1, x

        _, x = tf.while_loop(lambda s, _: s < tf.shape(t)[0], step, (tf.constant(0), x))
        return x

    def _sample_deterministic(self, x, t, a, b):      # ddim: c = 0, no noise term at all
        return self._sample_loop(x, t, a, b)

    def _sample_stochastic(self, x, t, a, b, c, noise):  # ddpm
        return self._sample_loop(x, t, a, b, c, noise)

    def _sampler(self, method: str, steps: int) -> tuple[Any, ...]:
        """sampler_coefficients (which checks method and steps) as float32 tensors, made
        once per (method, steps), and whether any step adds noise."""
        key = (method, steps)
        if key not in self._samplers:
            co = sampler_coefficients(self.config.schedule, method, steps)
            with self._place:
                self._samplers[key] = (tf.constant(co["t"], tf.int32), tf.constant(co["a"], tf.float32),
                                       tf.constant(co["b"], tf.float32), tf.constant(co["c"], tf.float32),
                                       bool(np.any(co["c"] != 0)))
        return self._samplers[key]

    # -- DiffusionModel --------------------------------------------------------------------
    def eps(self, x, t):
        with self._place:
            return self._eps(x, t)

    def loss(self, x0, t, noise):
        with self._place:
            return self._loss(x0, t, noise)

    def grads(self, x0, t, noise):
        with self._place:
            _, grads = self._grads(x0, t, noise)
        return dict(zip(self.net.named, grads))

    def train_step(self, x0, t, noise):
        with self._place:
            return self._train_step(x0, t, noise)

    def sample(self, x_T, noise=None, *, method: str = "ddim", steps: int = SAMPLE_STEPS):
        t, a, b, c, noisy = self._sampler(method, steps)
        with self._place:
            if noisy:
                return self._sample_noisy(x_T, t, a, b, c, noise)
            return self._sample(x_T, t, a, b)

    def export_params(self) -> dict[str, np.ndarray]:
        return {k: v.numpy() for k, v in self.net.named.items()}


def build(adapter: Any, config: DiffusionConfig, params: dict[str, np.ndarray], case: Case) -> TFDiffusion:
    return TFDiffusion(adapter, config, params, case)
