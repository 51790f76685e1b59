"""The DDPM UNet (Ho et al. 2020) in PyTorch, behind fwbench's DiffusionModel interface.

The modules (TimestepEmbedding, ResnetBlock, AttnBlock, Downsample, Upsample, Level, Mid,
UNet) carry the pytorch_diffusion port's names, so `UNet.named_parameters()` yields exactly
the names of workloads/diffusion.py. PyTorch's natural layouts are used inside: images NCHW,
conv weights OIHW, nn.Linear weights (out, in). The numpy params are HWIO and (in, out), so
they are permuted once when loaded (conv: permute(3, 2, 0, 1)) and once when exported or
returned as gradients. Images arrive NHWC at the interface and are permuted at the boundary.

Memory format: the NCHW tensors are kept in channels_last memory order (strides of NHWC),
the conv weights too. The NHWC interface arrays then already are in that order
(x.permute(0, 3, 1, 2) is a channels_last view, no copy), and oneDNN's convolutions run
faster on it here: at the small preset, one thread, eager eps took 39 ms against 45 ms
with contiguous NCHW, train_step 136 ms against 140 ms, compiled train_step 157 ms against
163 ms. Attention is F.scaled_dot_product_attention (PyTorch's fused kernel, one head);
the explicit softmax(q k^T * C**-0.5) v measured the same.

Modes: "eager" runs the modules as they are; "compiled" wraps each timed entry point in
torch.compile (Inductor), compiled lazily on first use, as frameworks/torch/gpt.py does:
  * eps: the UNet forward with its boundary permutes;
  * the loss (q_sample, UNet, mean squared error), whose backward AOTAutograd compiles with
    it; `loss` runs it without autograd, `grads` and train_step with (two graphs);
  * the train step as the strategy's recipe puts it together (frameworks.torch.optim.Trainer,
    the same for gpt): by default the compiled loss, `loss.backward()` and an eager fused
    AdamW; the recipes "compiled-adamw" and "compiled-autograd" compile the update too, or
    the whole step under compiled autograd. Dynamo breaks the graph at a .backward() call
    and torch.optim breaks it around its update by design: those breaks are recorded
    (graph_breaks) but do not make the case a fallback; the model's own graphs are compiled
    with fullgraph=True, and a break there would;
  * one sampler step a x + b eps(x, t), with t, a and b tensors so every step of every
    sampler and length reuses one graph ("ddpm" adds its c z outside, one eager op). The
    loop over the steps stays in Python: unrolling it would make Dynamo trace and Inductor
    compile `steps` copies of the UNet (a single copy takes minutes to compile on this
    2-core machine, and a new length would recompile), torch.while_loop / torch.scan are
    prototypes that warn of miscompiles, and the Python between steps costs microseconds
    against a step's tens of milliseconds (sample takes ~10x eps in the benchmarks).

Precision (workloads/precision.py), as frameworks/torch/gpt.py does it: every Conv2d, Linear and
AttnBlock holds `compute` (frameworks/torch/precision.py: COMPUTE[precision], set_compute), the
dtype of its products' inputs: float32 runs the modules as they are; bfloat16 casts each
convolution's or dense layer's input and weight, casts the product back to float32 and adds
its float32 bias, and writes the attention out (q k^T and p v with bf16 inputs, float32 scores
and softmax) instead of the fused SDPA. GroupNorm, SiLU, the timestep embedding, the loss, the
sampler's a x + b eps, parameters, gradients and AdamW stay float32.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

from frameworks.torch import compile_for
from frameworks.torch import precision as P
from frameworks.torch.optim import Trainer
from frameworks.torch.precision import Conv2d, Linear, attention, set_compute
from workloads import diffusion as D
from workloads.base import Model, attn_scale
from workloads.case import Case

# Module-level names the model reads, so that a test can patch this framework's copy alone
# (tests/test_mutations.py) while the numpy reference keeps its own.
from workloads.diffusion import GN_EPS, OPTIMIZER, sampler_coefficients

IMAGE_LAYOUT = "NCHW"   # of the primitives below and the modules (the interface is NHWC)

MEMORY_FORMAT = torch.channels_last

PRECISIONS = P.PRECISIONS      # the policies build honours: torch's dtype table's (frameworks/torch/precision.py)


def conv3x3(cin: int, cout: int, stride: int = 1) -> Conv2d:
    # Symmetric padding 1 on every side, the stride-2 Downsample too (workloads/diffusion.py).
    return Conv2d(cin, cout, 3, stride=stride, padding=1)


def group_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int) -> torch.Tensor:
    # torch's default eps is 1e-5; DDPM's is 1e-6. Groups are contiguous channel blocks in both.
    return F.group_norm(x, groups, w, b, GN_EPS)


def timestep_embedding(t: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """[sin(t f), cos(t f)] (B, ch) of t (B,) cast to float32, freqs (ch/2,) float32."""
    arg = t.float()[:, None] * freqs[None, :]                       # (B, half)
    return torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)


class GroupNorm(nn.Module):
    """nn.GroupNorm's parameters (weight, bias) around `group_norm`."""

    def __init__(self, cfg: D.DiffusionConfig, c: int) -> None:
        super().__init__()
        self.groups = cfg.num_groups
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return group_norm(x, self.weight, self.bias, self.groups)


class TimestepEmbedding(nn.Module):
    """temb = dense.1(SiLU(dense.0(sinusoidal(t, ch)))), (B,) -> (B, 4ch)."""

    def __init__(self, cfg: D.DiffusionConfig) -> None:
        super().__init__()
        self.dense = nn.ModuleList([Linear(cfg.ch, cfg.temb_ch), Linear(cfg.temb_ch, cfg.temb_ch)])
        # f_k = exp(-log(10000) k / (half - 1)): constants, computed in float64 once and stored
        # as float32, so no framework's float32 exp can make its frequencies differ.
        freqs = D.timestep_frequencies(cfg.ch)
        self.register_buffer("freqs", torch.tensor(freqs, dtype=torch.float32), persistent=False)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        emb = timestep_embedding(t, self.freqs)                     # (B, ch)
        return self.dense[1](F.silu(self.dense[0](emb)))            # (B, 4ch)


class ResnetBlock(nn.Module):
    """shortcut(x) + conv2(SiLU(GN2(conv1(SiLU(GN1(x))) + temb_proj(SiLU(temb)))))."""

    def __init__(self, cfg: D.DiffusionConfig, cin: int, cout: int) -> None:
        super().__init__()
        self.norm1 = GroupNorm(cfg, cin)
        self.conv1 = conv3x3(cin, cout)
        self.temb_proj = Linear(cfg.temb_ch, cout)
        self.norm2 = GroupNorm(cfg, cout)
        self.conv2 = conv3x3(cout, cout)
        # a 1x1 conv only where the width changes, else the identity
        self.nin_shortcut = Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))                       # (B, Cout, H, W)
        h = h + self.temb_proj(F.silu(temb))[:, :, None, None]      # + (B, Cout, 1, 1)
        h = self.conv2(F.silu(self.norm2(h)))
        if self.nin_shortcut is not None:
            x = self.nin_shortcut(x)
        return x + h


class AttnBlock(nn.Module):
    """x + proj_out(softmax(q k^T * C**-0.5) v): one head over all H*W positions."""
    compute: torch.dtype = P.F32   # the dtype of the attention's products' inputs (precision.attention)

    def __init__(self, cfg: D.DiffusionConfig, c: int) -> None:
        super().__init__()
        self.norm = GroupNorm(cfg, c)
        self.q = Conv2d(c, c, 1)
        self.k = Conv2d(c, c, 1)
        self.v = Conv2d(c, c, 1)
        self.proj_out = Conv2d(c, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        h = self.norm(x)
        # (B, C, H, W) -> (B, 1, N, C): one head whose sequence is the N = H*W positions.
        # In channels_last order this is a view, no copy.
        q, k, v = (m(h).flatten(2).transpose(1, 2)[:, None] for m in (self.q, self.k, self.v))
        h = attention(q, k, v, attn_scale(C), self.compute)                 # (B, 1, N, C)
        h = h[:, 0].transpose(1, 2).reshape(B, C, H, W)
        return x + self.proj_out(h)


class Downsample(nn.Module):

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = conv3x3(c, c, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)                                         # (B, C, H/2, W/2)


class Upsample(nn.Module):

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = conv3x3(c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))  # (B, C, 2H, 2W)


class Level(nn.Module):
    """One resolution of the down or up path: its resnet blocks, their attention blocks
    (empty where the resolution has none) and the resampling conv (absent on the last)."""

    def __init__(self, block: list[nn.Module], attn: list[nn.Module], resample: nn.Module | None,
                 kind: str) -> None:
        super().__init__()
        self.block = nn.ModuleList(block)
        self.attn = nn.ModuleList(attn)
        if resample is not None:
            setattr(self, kind, resample)                           # "downsample" / "upsample"


class Mid(nn.Module):

    def __init__(self, cfg: D.DiffusionConfig, c: int) -> None:
        super().__init__()
        self.block_1 = ResnetBlock(cfg, c, c)
        self.attn_1 = AttnBlock(cfg, c)
        self.block_2 = ResnetBlock(cfg, c, c)

    def forward(self, h: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        return self.block_2(self.attn_1(self.block_1(h, temb)), temb)


class UNet(nn.Module):
    """eps_theta(x, t): the DDPM CIFAR-10 UNet (workloads/diffusion.py's docstring), built
    from `unet_blocks(cfg)`, the block list the parameter shapes come from."""

    def __init__(self, cfg: D.DiffusionConfig, precision: str = "fp32") -> None:
        super().__init__()
        self.config = cfg
        L = len(cfg.ch_mult)
        self.temb = TimestepEmbedding(cfg)
        self.conv_in = conv3x3(cfg.in_channels, cfg.ch)
        # Collect each level's blocks from the one block list, in forward order.
        levels: dict[str, list[dict[str, Any]]] = {
            path: [{"block": [], "attn": [], "resample": None} for _ in range(L)] for path in ("down", "up")}
        for b in D.unet_blocks(cfg):
            path, _, rest = b.name.partition(".")
            if path not in levels:
                continue
            lv = levels[path][int(rest.split(".")[0])]
            if b.kind == "resnet":
                lv["block"].append(ResnetBlock(cfg, b.cin, b.cout))
            elif b.kind == "attn":
                lv["attn"].append(AttnBlock(cfg, b.cin))
            else:
                lv["resample"] = (Downsample if b.kind == "downsample" else Upsample)(b.cin)
        self.down = nn.ModuleList([Level(**lv, kind="downsample") for lv in levels["down"]])
        self.mid = Mid(cfg, cfg.widths[-1])
        self.up = nn.ModuleList([Level(**lv, kind="upsample") for lv in levels["up"]])
        self.norm_out = GroupNorm(cfg, cfg.widths[0])
        self.conv_out = conv3x3(cfg.widths[0], cfg.in_channels)
        set_compute(self, precision)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x (B, C, H, W) float32, t (B,) integer -> eps (B, C, H, W)."""
        L = len(self.config.ch_mult)
        # Attention where the level has attention blocks (the levels at attn_resolutions when
        # the image has the config's size), not where the current resolution is listed: the
        # same at the config's size, and the same model at any other (workloads.dynamic's
        # ddpm stream), with no test on a size that dynamic shapes would have to guard.
        temb = self.temb(t)                                         # (B, 4ch)
        hs = [self.conv_in(x)]                                      # skip stack, (B, ch, S, S) first
        for i, level in enumerate(self.down):
            for j, block in enumerate(level.block):
                h = block(hs[-1], temb)
                if len(level.attn):
                    h = level.attn[j](h)
                hs.append(h)
            if i != L - 1:
                hs.append(level.downsample(hs[-1]))                 # (B, C, H/2, W/2)
        h = self.mid(hs[-1], temb)
        for i in reversed(range(L)):
            level = self.up[i]
            for j, block in enumerate(level.block):
                h = block(torch.cat([h, hs.pop()], dim=1), temb)    # h first, then the skip
                if len(level.attn):
                    h = level.attn[j](h)
            if i != 0:
                h = level.upsample(h)                               # (B, C, 2H, 2W)
        return self.conv_out(F.silu(self.norm_out(h)))              # (B, in_channels, S, S)


# ----------------------------------------------------------------------------- interface

def build(adapter: Any, config: D.DiffusionConfig, params: dict[str, np.ndarray], case: Case) -> TorchDiffusion:
    return TorchDiffusion(adapter, config, params, case)


def to_nchw(x: torch.Tensor) -> torch.Tensor:
    """(B, H, W, C) -> (B, C, H, W) in MEMORY_FORMAT: a view of a contiguous NHWC array."""
    return x.permute(0, 3, 1, 2).contiguous(memory_format=MEMORY_FORMAT)


def to_nhwc(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 3, 1)                                    # (B, H, W, C), a view


class TorchDiffusion(Model):
    """workloads.diffusion.DiffusionModel for PyTorch: a UNet module, its AdamW optimizer, the
    schedule's coefficients as float32 tensors, and the entry points the benchmarks time
    (compiled in mode "compiled")."""

    def __init__(self, adapter: Any, config: D.DiffusionConfig, params: dict[str, np.ndarray], case: Case) -> None:
        D.check_params(config, params)
        mode, device, strategy = case.mode, case.device, case.strategy
        self.config, self.mode, self.device = config, mode, device
        self.precision = case.precision
        self.net = UNet(config, case.precision).to(device=device, memory_format=MEMORY_FORMAT)
        self._params = dict(self.net.named_parameters())
        assert set(self._params) == set(params), "module names differ from workloads.diffusion's"
        with torch.no_grad():
            for k, p in self._params.items():
                a = torch.from_numpy(params[k])
                if a.ndim == 4:
                    a = a.permute(3, 2, 0, 1)                       # HWIO -> OIHW
                elif a.ndim == 2:
                    a = a.t()                                       # (in, out) -> (out, in)
                p.copy_(a)                                          # keeps p's memory format
        sched = config.schedule
        self._sqrt_abar = torch.tensor(sched.sqrt_alphas_cumprod, dtype=torch.float32, device=device)
        self._sqrt_1m_abar = torch.tensor(sched.sqrt_one_minus_alphas_cumprod, dtype=torch.float32,
                                          device=device)

        # AdamW and the train step's recipe as frameworks/torch/gpt.py has them: decay on
        # conv/dense weights only (frameworks.torch.optim.Trainer).
        self.trainer = Trainer(self._params, OPTIMIZER, D.decayed, self._loss_fn, mode, strategy, device)
        self.optimizer, self.adamw_impl = self.trainer.optimizer, self.trainer.adamw_impl

        # The timed entry points; torch.compile compiles each on its first call, the model's
        # graphs with fullgraph=True (compile_model).
        wrap = compile_for(mode, strategy, device)
        self._eps = wrap(self._eps_fn)
        self._loss = self.trainer.loss
        self._sample_step = wrap(self._sample_step_fn)

    # -- what is compiled ------------------------------------------------------------
    def _eps_fn(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return to_nhwc(self.net(to_nchw(x), t))                     # (B, H, W, C)

    def _loss_fn(self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Algorithm 1: mean((noise - eps(sqrt(abar_t) x0 + sqrt(1 - abar_t) noise, t))^2)."""
        x0, noise = to_nchw(x0), to_nchw(noise)                     # (B, C, H, W)
        x_t = (self._sqrt_abar[t][:, None, None, None] * x0
               + self._sqrt_1m_abar[t][:, None, None, None] * noise)
        return F.mse_loss(self.net(x_t, t), noise)                  # mean over all elements

    def _sample_step_fn(self, x: torch.Tensor, t: torch.Tensor, a: torch.Tensor,
                        b: torch.Tensor) -> torch.Tensor:
        """a x + b eps(x, t) on NCHW x: the deterministic part of every sampler step."""
        return a * x + b * self.net(x, t)

    # -- DiffusionModel --------------------------------------------------------------
    def eps(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self._eps(x, t)

    def loss(self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self._loss(x0, t, noise)

    def grads(self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> dict[str, torch.Tensor]:
        """Gradients keyed and laid out as workloads.diffusion's params (HWIO, (in, out))."""
        self.trainer.zero_grad()
        self._loss(x0, t, noise).backward()
        return {k: _to_numpy_layout(p.grad) for k, p in self._params.items()}

    def train_step(self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.trainer.step(x0, t, noise)

    def sample(self, x_T: torch.Tensor, noise: torch.Tensor | None = None, *, method: str = "ddim",
               steps: int = D.SAMPLE_STEPS) -> torch.Tensor:
        """x_0 from x_T (B, H, W, C): x <- a x + b eps(x, t) + c noise[s], s = 0 .. steps-1."""
        coefs = sampler_coefficients(self.config.schedule, method, steps)
        B = x_T.shape[0]
        dev = x_T.device
        t = torch.tensor(coefs["t"], device=dev)[:, None].repeat(1, B)        # (S, B) int32
        a, b, c = (torch.tensor(coefs[k], dtype=torch.float32, device=dev) for k in "abc")  # (S,) each
        with torch.no_grad():
            x = to_nchw(x_T)                                                  # (B, C, H, W)
            for s in range(steps):
                x = self._sample_step(x, t[s], a[s], b[s])
                if coefs["c"][s] != 0:                                        # "ddpm" only
                    x = x + c[s] * to_nchw(noise[s])
        return to_nhwc(x)

    def export_params(self) -> dict[str, np.ndarray]:
        # a copy: training goes on in place
        return {k: _to_numpy_layout(p.detach()).cpu().numpy().copy() for k, p in self._params.items()}


def _to_numpy_layout(p: torch.Tensor) -> torch.Tensor:
    """OIHW -> HWIO, (out, in) -> (in, out); a view."""
    if p.ndim == 4:
        return p.permute(2, 3, 1, 0)
    return p.t() if p.ndim == 2 else p
