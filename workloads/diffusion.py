"""DDPM (Ho et al. 2020), framework-free: the noise schedule, the UNet denoiser's config,
presets, parameters, data and FLOPs, the diffusion process (training loss, samplers),
the interface every framework implements, and a numpy float64 reference.

Three parts kept apart, as in the paper's own code (diffusion_tf/diffusion_utils_2.py
and models/unet.py):
  1. the schedule: numpy float64 coefficients of the forward process (`Schedule`);
  2. the denoiser: eps_theta(x_t, t), the UNet of the CIFAR-10 model (`DiffusionConfig`);
  3. the process, which takes the denoiser as a function (`q_sample`, `training_loss`,
     `sampler_coefficients`, `p_sample_loop`), like DDPM's `training_losses(denoise_fn, ...)`.

The UNet (unet.py of the paper; the pytorch_diffusion port names its parameters):
    temb = Dense(4ch)(SiLU(Dense(4ch)(sinusoidal(t, ch))))
    h    = conv_in(x)                                  pushed on the skip stack
    down level i (resolution S/2^i, width ch*ch_mult[i]):
        num_res_blocks x [ResnetBlock, + AttnBlock if the resolution is in attn_resolutions]
        each output pushed; then (not on the last level) Downsample, pushed
    mid: ResnetBlock, AttnBlock, ResnetBlock
    up level i (from the last level to 0):
        num_res_blocks+1 x [ResnetBlock(concat(h, skip.pop())), + AttnBlock as above]
        then (not on level 0) Upsample
    out  = conv_out(SiLU(GroupNorm(h)))
  ResnetBlock(x) = shortcut(x) + conv2(SiLU(GN2(conv1(SiLU(GN1(x))) + temb_proj(SiLU(temb)))))
      shortcut: 1x1 conv `nin_shortcut` where in and out widths differ, else identity.
  AttnBlock(x)   = x + proj_out(softmax(q k^T * C**-0.5) v), q, k, v = 1x1 convs of GN(x);
      one head, attending over all H*W positions, softmax over the keys.
  Downsample(x)  = conv3x3 stride 2;  Upsample(x) = conv3x3(nearest-neighbour x2 (x)).

Conventions every framework follows (the ones where frameworks' defaults differ):
  * Images at the interface are NHWC float32 (B, H, W, C); PyTorch converts to NCHW at its
    boundary. Timesteps are int32 (B,), each in [0, num_timesteps).
  * Conv weights in the numpy dict are HWIO (kh, kw, in, out); Dense weights are (in, out):
    y = x @ W + b. PyTorch transposes once at load (conv: permute(3, 2, 0, 1)).
  * Every 3x3 conv pads explicitly 1 pixel on each side, the stride-2 Downsample too. This
    differs from the paper's TF code, whose "SAME" padding pads stride-2 convs by 0 before
    and 1 after; symmetric padding is the one all three frameworks express the same way
    (torch padding=1, lax padding ((1, 1), (1, 1)), tf explicit [[0,0],[1,1],[1,1],[0,0]]).
  * GroupNorm: epsilon 1e-6 (the TF code's; torch's default 1e-5 must be overridden),
    biased variance over (H, W, channels of the group), groups are contiguous channel
    blocks (channel c is in group c // (C / num_groups)), then a per-channel affine.
  * Skip connections concatenate along channels with h first, then the skip.
  * SiLU(x) = x * sigmoid(x); softmax over keys; attention scale C**-0.5 (C = block width).
  * The timestep embedding is DDPM's get_timestep_embedding: half = ch // 2,
    freqs = exp(-log(10000) * arange(half) / (half - 1)), emb = concat(sin(t f), cos(t f)),
    computed from t cast to float32 (the reference: float64).
  * Dropout is 0 (the paper used 0.1 on CIFAR-10): fwbench compares deterministic maths.

Parameters are a flat dict of float32 numpy arrays (`param_shapes` lists all, in forward
order), named as in the pytorch_diffusion port of the DDPM checkpoints:
    temb.dense.0.weight (ch, 4ch)   temb.dense.1.weight (4ch, 4ch)   + .bias (4ch,)
    conv_in.weight (3, 3, in_channels, ch)                            + .bias
    down.{i}.block.{j}.{norm1, conv1, temb_proj, norm2, conv2, nin_shortcut}.{weight, bias}
        norm*: (C,) each; conv1 (3, 3, Cin, Cout); conv2 (3, 3, Cout, Cout);
        temb_proj (4ch, Cout); nin_shortcut (1, 1, Cin, Cout), only where Cin != Cout
    down.{i}.attn.{j}.{norm, q, k, v, proj_out}.{weight, bias}    q/k/v/proj_out (1, 1, C, C)
    down.{i}.downsample.conv.{weight, bias}                        (3, 3, C, C)
    mid.block_1.*, mid.attn_1.*, mid.block_2.*
    up.{i}.block.{j}.*, up.{i}.attn.{j}.*, up.{i}.upsample.conv.*  (i is the level, as in down)
    norm_out.{weight, bias} (C,)     conv_out.weight (3, 3, ch*ch_mult[0], in_channels) + .bias
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from workloads.base import (
    AdamW,
    FwbenchError,
    Preset,
    TaskSpec,
    check_param_shapes,
    check_positive,
    choose,
    device_strategies,  # noqa: F401 (declared_cases reads it from the workload)
    dtype_name,
    fixed_tasks,
    host_values,
    shape_of,
    train_step_strategies,
)
from workloads.base import (
    check_inputs as _check_inputs,
)

NAME = "diffusion"
TASKS = ("forward", "train_step", "sample")
tasks = fixed_tasks(TASKS)
# Its strategies after the first are optional variants (torch's train-step recipes, CUDA graphs):
# `--variants default` (fwbench run's default with sets) leaves them out.
OPTIONAL_VARIANTS = True
GN_EPS = 1e-6
SAMPLE_STEPS = 10        # sampler steps of the `sample` task
SAMPLERS = ("ddpm", "ddim")
# The paper's optimiser: Adam, lr 2e-4, gradient norm clipped at 1 (Sec. 4 and App. B).
# AdamW with weight_decay 0 is exactly Adam. No warm-up (the paper warms up over 5000
# steps) so every timed step does the same work; no EMA of the weights (it costs no matmul).
OPTIMIZER = AdamW(lr=2e-4, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, clip_norm=1.0)


# ----------------------------------------------------------------------------- 1. schedule

def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Schedule:
    """The forward process q(x_t | x_{t-1}) = N(sqrt(1 - beta_t) x_{t-1}, beta_t I) with
    linear betas (the paper's: 1e-4 to 0.02 over T = 1000), and every coefficient derived
    from it, numpy float64 arrays of shape (T,) named as in diffusion_utils_2.py. Index t
    runs 0..T-1 (the paper's t = 1..T shifted down by one)."""
    beta_start: float = 1e-4
    beta_end: float = 0.02
    num_timesteps: int = 1000
    betas: np.ndarray = field(init=False, repr=False, compare=False)
    alphas: np.ndarray = field(init=False, repr=False, compare=False)
    alphas_cumprod: np.ndarray = field(init=False, repr=False, compare=False)
    alphas_cumprod_prev: np.ndarray = field(init=False, repr=False, compare=False)
    sqrt_alphas_cumprod: np.ndarray = field(init=False, repr=False, compare=False)
    sqrt_one_minus_alphas_cumprod: np.ndarray = field(init=False, repr=False, compare=False)
    log_one_minus_alphas_cumprod: np.ndarray = field(init=False, repr=False, compare=False)
    sqrt_recip_alphas_cumprod: np.ndarray = field(init=False, repr=False, compare=False)
    sqrt_recipm1_alphas_cumprod: np.ndarray = field(init=False, repr=False, compare=False)
    posterior_variance: np.ndarray = field(init=False, repr=False, compare=False)
    posterior_log_variance_clipped: np.ndarray = field(init=False, repr=False, compare=False)
    posterior_mean_coef1: np.ndarray = field(init=False, repr=False, compare=False)
    posterior_mean_coef2: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_positive(self, "num_timesteps")
        if not 0.0 < self.beta_start <= self.beta_end < 1.0:
            raise FwbenchError(f"Schedule needs 0 < beta_start <= beta_end < 1, got "
                               f"beta_start={self.beta_start}, beta_end={self.beta_end}")
        betas = np.linspace(self.beta_start, self.beta_end, self.num_timesteps, dtype=np.float64)
        alphas = 1.0 - betas
        abar = np.cumprod(alphas)                               # alpha-bar_t
        abar_prev = np.append(1.0, abar[:-1])                   # alpha-bar_{t-1}, 1 at t = 0
        post_var = betas * (1.0 - abar_prev) / (1.0 - abar)     # beta-tilde_t (eq. 7)
        derived = dict(
            betas=betas, alphas=alphas, alphas_cumprod=abar, alphas_cumprod_prev=abar_prev,
            # q(x_t | x_0) = N(sqrt(abar_t) x_0, (1 - abar_t) I)  (eq. 4)
            sqrt_alphas_cumprod=np.sqrt(abar),
            sqrt_one_minus_alphas_cumprod=np.sqrt(1.0 - abar),
            log_one_minus_alphas_cumprod=np.log(1.0 - abar),
            # x_0 = sqrt(1/abar_t) x_t - sqrt(1/abar_t - 1) eps
            sqrt_recip_alphas_cumprod=np.sqrt(1.0 / abar),
            sqrt_recipm1_alphas_cumprod=np.sqrt(1.0 / abar - 1.0),
            # q(x_{t-1} | x_t, x_0) = N(coef1 x_0 + coef2 x_t, beta-tilde_t I)  (eq. 6, 7)
            posterior_variance=post_var,
            # beta-tilde_0 = 0: its log is clipped to beta-tilde_1's, as in the DDPM code
            posterior_log_variance_clipped=np.log(np.append(post_var[1:2], post_var[1:])),
            posterior_mean_coef1=betas * np.sqrt(abar_prev) / (1.0 - abar),
            posterior_mean_coef2=(1.0 - abar_prev) * np.sqrt(alphas) / (1.0 - abar),
        )
        for k, v in derived.items():
            object.__setattr__(self, k, _frozen(v))


# ----------------------------------------------------------------------------- 2. denoiser

@dataclass(frozen=True)
class DiffusionConfig:
    """The DDPM UNet and its schedule, frozen; the defaults are the paper's CIFAR-10 model.
    Variants: `workloads.base.replace_config(cfg, ch=64)`."""
    image_size: int = 32
    in_channels: int = 3
    ch: int = 128                        # base width; level i has ch * ch_mult[i] channels
    ch_mult: tuple[int, ...] = (1, 2, 2, 2)
    num_res_blocks: int = 2
    attn_resolutions: tuple[int, ...] = (16,)
    num_groups: int = 32                 # GroupNorm groups
    dropout: float = 0.0
    schedule: Schedule = Schedule()

    def __post_init__(self) -> None:
        check_positive(self, "image_size", "in_channels", "ch", "num_res_blocks", "num_groups")
        for name in ("ch_mult", "attn_resolutions"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or not all(isinstance(m, int) and not isinstance(m, bool)
                                                   and m > 0 for m in v):
                raise FwbenchError(f"DiffusionConfig.{name} must be a tuple of positive integers, got {v!r}")
        if not self.ch_mult:
            raise FwbenchError("DiffusionConfig.ch_mult must name at least one level, e.g. (1, 2)")
        if self.ch % 2 or self.ch < 4:
            raise FwbenchError(f"DiffusionConfig.ch must be even and at least 4 (the timestep "
                               f"embedding has ch/2 frequencies), got {self.ch}")
        down = 2 ** (len(self.ch_mult) - 1)
        if self.image_size % down:
            raise FwbenchError(f"DiffusionConfig.image_size ({self.image_size}) must be divisible by "
                               f"2**(len(ch_mult)-1) = {down} to halve it at every level")
        if self.ch % self.num_groups:  # then every width (a multiple of ch) splits into whole groups
            raise FwbenchError(f"DiffusionConfig.ch ({self.ch}) must be divisible by num_groups "
                               f"({self.num_groups}): GroupNorm needs whole groups at every width")
        bad = [r for r in self.attn_resolutions if r not in self.resolutions]
        if bad:
            raise FwbenchError(f"DiffusionConfig.attn_resolutions {bad} are never reached: the "
                               f"levels run at {', '.join(map(str, self.resolutions))}")
        if self.dropout != 0.0:
            raise FwbenchError("DiffusionConfig.dropout must be 0.0: fwbench compares deterministic math")
        if not isinstance(self.schedule, Schedule):
            raise FwbenchError(f"DiffusionConfig.schedule must be a Schedule, got {type(self.schedule).__name__}")

    @property
    def widths(self) -> tuple[int, ...]:
        """Channels of each level."""
        return tuple(self.ch * m for m in self.ch_mult)

    @property
    def resolutions(self) -> tuple[int, ...]:
        """Spatial size of each level: image_size, image_size/2, ..."""
        return tuple(self.image_size >> i for i in range(len(self.ch_mult)))

    @property
    def temb_ch(self) -> int:
        return 4 * self.ch

    def check_images(self, x: Any, what: str = "images", dtypes: tuple[str, ...] = ("float32",)) -> None:
        """Refuse images (numpy or any framework's array) the model cannot take, with the
        reason: NHWC (batch, image_size, image_size, in_channels), batch >= 1 (TF's BiasAdd
        refused a batch of 0 where torch and JAX returned nothing), float32 (the float64
        reference also takes float64)."""
        want = (self.image_size, self.image_size, self.in_channels)
        shape = shape_of(x)
        if len(shape) != 4 or shape[1:] != want:
            raise FwbenchError(f"{what} must be NHWC (batch, {', '.join(map(str, want))}), got shape {shape}")
        if shape[0] < 1:
            raise FwbenchError(f"{what} must hold at least one image (batch >= 1), got shape {shape}")
        if dtype_name(x) not in dtypes:
            raise FwbenchError(f"{what} must be {' or '.join(dtypes)}, got {dtype_name(x)}")

    def check_timesteps(self, t: Any, batch: int) -> None:
        """Timesteps: integers of shape (batch,), each in [0, num_timesteps) (read from a
        host copy: B ints)."""
        T = self.schedule.num_timesteps
        dt = dtype_name(t)
        if shape_of(t) != (batch,) or not dt.startswith(("int", "uint")):
            raise FwbenchError(f"timesteps must be integers of shape ({batch},), got {dt} {shape_of(t)}")
        v = host_values(t)
        if v.size and (v.min() < 0 or v.max() >= T):
            raise FwbenchError(f"timesteps must lie in [0, {T}), got {v.min()}..{v.max()}")

    def check_eps_inputs(self, x: Any, t: Any) -> None:
        """The denoiser's inputs: images x_t and their timesteps."""
        self.check_images(x)
        self.check_timesteps(t, shape_of(x)[0])

    def check_batch(self, x0: Any, t: Any, noise: Any) -> None:
        """The inputs of loss, grads and train_step: clean images, timesteps, noise like x0."""
        self.check_eps_inputs(x0, t)
        self.check_images(noise, "noise")
        if shape_of(noise) != shape_of(x0):
            raise FwbenchError(f"noise must have the images' shape {shape_of(x0)}, got {shape_of(noise)}")

    def check_sample(self, x_T: Any, noise: Any, method: str, steps: int) -> None:
        """The inputs of sample: x_T, a known sampler and step count, and noise
        (steps, B, H, W, C) float32 where the sampler adds noise ("ddpm"; "ddim" ignores it)."""
        self.check_images(x_T, "x_T")
        coefs = sampler_coefficients(self.schedule, method, steps)       # checks method, steps
        want = (steps, *shape_of(x_T))
        if noise is None and np.any(coefs["c"] != 0):
            raise FwbenchError(f"the {method} sampler needs noise of shape {want} (steps, B, H, W, C)")
        if noise is not None:
            if shape_of(noise) != want:
                raise FwbenchError(f"sampler noise must have shape {want}, got {shape_of(noise)}")
            if dtype_name(noise) != "float32":
                raise FwbenchError(f"sampler noise must be float32, got {dtype_name(noise)}")


# Each method's input rule (workloads.base.check_inputs): where inputs are made, never in a call.
INPUT_RULES: dict[str, Any] = {
    "eps": lambda cfg, x, t: cfg.check_eps_inputs(x, t),
    "loss": lambda cfg, x0, t, noise: cfg.check_batch(x0, t, noise),
    "grads": lambda cfg, x0, t, noise: cfg.check_batch(x0, t, noise),
    "train_step": lambda cfg, x0, t, noise: cfg.check_batch(x0, t, noise),
    "sample": lambda cfg, x_T, noise=None, method="ddim", steps=SAMPLE_STEPS: cfg.check_sample(x_T, noise, method,
                                                                                              steps),
}


def check_inputs(cfg: DiffusionConfig, method: str, /, *args: Any, **kwargs: Any) -> None:
    """The DDPM's input rules for `method`'s arguments (numpy or framework arrays), one line."""
    _check_inputs(INPUT_RULES, cfg, method, args, kwargs)


PRESETS: dict[str, Preset] = {
    "tiny": Preset("tiny", DiffusionConfig(image_size=16, ch=16, ch_mult=(1, 2), num_res_blocks=1,
                                           attn_resolutions=(8,), num_groups=4),
                   batch=2, note="for tests"),
    "small": Preset("small", DiffusionConfig(ch=16, ch_mult=(1, 2, 4, 8), num_res_blocks=1,
                                             attn_resolutions=(8,), num_groups=8),
                    batch=8, note="CPU benchmark default: 2.5M params, widths 16..128 at 32..4 pixels"),
    "ddpm-cifar": Preset("ddpm-cifar", DiffusionConfig(), batch=128,
                         note="the DDPM paper's CIFAR-10 model (35.7M), its batch 128; for GPUs"),
}


def preset(name: str) -> Preset:
    return PRESETS[choose("diffusion preset", name, PRESETS)]


# ----------------------------------------------------------------------------- params

@dataclass(frozen=True)
class Block:
    """One block of the UNet in forward order: what it is, its parameter prefix, its input
    and output widths and the spatial size of its output."""
    kind: str        # dense | conv | resnet | attn | downsample | upsample | norm
    name: str
    cin: int
    cout: int
    res: int


def unet_blocks(cfg: DiffusionConfig) -> list[Block]:
    """The UNet's blocks in forward order: the one description `param_shapes` and
    `forward_flops` read, following the skip stack to get the up path's input widths."""
    S, L, ch, t4 = cfg.image_size, len(cfg.ch_mult), cfg.ch, cfg.temb_ch
    blocks = [Block("dense", "temb.dense.0", ch, t4, 1), Block("dense", "temb.dense.1", t4, t4, 1),
              Block("conv", "conv_in", cfg.in_channels, ch, S)]
    skips, c = [ch], ch                  # widths of the activations on the skip stack
    for i, (width, res) in enumerate(zip(cfg.widths, cfg.resolutions)):
        for j in range(cfg.num_res_blocks):
            blocks.append(Block("resnet", f"down.{i}.block.{j}", c, width, res))
            c = width
            if res in cfg.attn_resolutions:
                blocks.append(Block("attn", f"down.{i}.attn.{j}", c, c, res))
            skips.append(c)
        if i != L - 1:
            blocks.append(Block("downsample", f"down.{i}.downsample", c, c, res // 2))
            skips.append(c)
    res = cfg.resolutions[-1]
    blocks += [Block("resnet", "mid.block_1", c, c, res), Block("attn", "mid.attn_1", c, c, res),
               Block("resnet", "mid.block_2", c, c, res)]
    for i in reversed(range(L)):
        width, res = cfg.widths[i], cfg.resolutions[i]
        for j in range(cfg.num_res_blocks + 1):
            blocks.append(Block("resnet", f"up.{i}.block.{j}", c + skips.pop(), width, res))
            c = width
            if res in cfg.attn_resolutions:
                blocks.append(Block("attn", f"up.{i}.attn.{j}", c, c, res))
        if i != 0:
            blocks.append(Block("upsample", f"up.{i}.upsample", c, c, res * 2))
    assert not skips
    return blocks + [Block("norm", "norm_out", c, c, S), Block("conv", "conv_out", c, cfg.in_channels, S)]


def _block_shapes(b: Block, temb_ch: int) -> dict[str, tuple[int, ...]]:
    def affine(n: str, k: int, cin: int, cout: int) -> dict[str, tuple[int, ...]]:
        return {f"{n}.weight": (k, k, cin, cout) if k else (cin, cout), f"{n}.bias": (cout,)}
    norm = lambda n, c: {f"{n}.weight": (c,), f"{n}.bias": (c,)}  # noqa: E731
    p, s = b.name, {}
    if b.kind == "dense":
        s.update(affine(p, 0, b.cin, b.cout))
    elif b.kind == "conv":
        s.update(affine(p, 3, b.cin, b.cout))
    elif b.kind == "norm":
        s.update(norm(p, b.cin))
    elif b.kind in ("downsample", "upsample"):
        s.update(affine(f"{p}.conv", 3, b.cin, b.cout))
    elif b.kind == "resnet":
        s.update(norm(f"{p}.norm1", b.cin))
        s.update(affine(f"{p}.conv1", 3, b.cin, b.cout))
        s.update(affine(f"{p}.temb_proj", 0, temb_ch, b.cout))
        s.update(norm(f"{p}.norm2", b.cout))
        s.update(affine(f"{p}.conv2", 3, b.cout, b.cout))
        if b.cin != b.cout:
            s.update(affine(f"{p}.nin_shortcut", 1, b.cin, b.cout))
    else:  # attn
        s.update(norm(f"{p}.norm", b.cin))
        for n in ("q", "k", "v", "proj_out"):
            s.update(affine(f"{p}.{n}", 1, b.cin, b.cin))
    return s


def param_shapes(cfg: DiffusionConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in forward order (conv HWIO, dense (in, out))."""
    shapes: dict[str, tuple[int, ...]] = {}
    for b in unet_blocks(cfg):
        shapes.update(_block_shapes(b, cfg.temb_ch))
    return shapes


def decayed(name: str, shape: tuple[int, ...]) -> bool:
    """Which parameters AdamW would decay: conv and dense weights (2 or more dimensions),
    not biases or GroupNorm parameters. Immaterial at OPTIMIZER's weight_decay 0, but the
    AdamW code is shared with gpt and asks."""
    return len(shape) >= 2


def init_params(cfg: DiffusionConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Conv and dense weights from DDPM's default_init: variance scaling, fan_avg, uniform,
    i.e. U(-l, l) with l = sqrt(3 / ((fan_in + fan_out) / 2)), fan_in = kh*kw*in,
    fan_out = kh*kw*out (dense: kh = kw = 1). Biases 0; GroupNorm weight 1, bias 0. float32.

    Unlike the paper (init_scale 1e-10 for each res block's conv2, proj_out and conv_out,
    so every residual branch and the output start at ~0), every weight gets scale 1: a net
    whose output and most gradients are ~0 would make equivalence tests vacuous. The work
    per step, which is what fwbench times, does not depend on the values."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in param_shapes(cfg).items():
        if len(shape) >= 2:
            receptive = int(np.prod(shape[:-2]))                  # kh*kw, 1 for dense
            fan_avg = receptive * (shape[-2] + shape[-1]) / 2.0
            limit = math.sqrt(3.0 / fan_avg)
            arr = rng.uniform(-limit, limit, shape)
        elif name.endswith(".weight"):                          # GroupNorm scale
            arr = np.ones(shape)
        else:
            arr = np.zeros(shape)
        out[name] = arr.astype(np.float32)
    return out


def check_params(cfg: DiffusionConfig, params: dict[str, np.ndarray]) -> None:
    """Refuse a parameter dict that does not fit the config, naming what differs."""
    check_param_shapes("diffusion", param_shapes(cfg), params)


def n_params(cfg: DiffusionConfig) -> int:
    return sum(int(np.prod(s)) for s in param_shapes(cfg).values())


# ----------------------------------------------------------------------------- data

def make_images(cfg: DiffusionConfig, batch: int, seed: int = 0) -> np.ndarray:
    """Seeded smooth images in [-1, 1], NHWC float32: per image and channel a sum of three
    plane waves of 0.5-3 cycles per image in random directions and phases, scaled so its
    largest magnitude is 1 (data scaled to [-1, 1] as in the paper)."""
    rng = np.random.default_rng([seed, 0])
    S, C = cfg.image_size, cfg.in_channels
    yy, xx = np.meshgrid(np.arange(S) / S, np.arange(S) / S, indexing="ij")      # (S, S)
    freq = rng.uniform(0.5, 3.0, (batch, C, 3)) * 2 * np.pi
    angle = rng.uniform(0, 2 * np.pi, (batch, C, 3))
    phase = rng.uniform(0, 2 * np.pi, (batch, C, 3))
    amp = rng.uniform(0.3, 1.0, (batch, C, 3))
    arg = (freq * np.cos(angle))[..., None, None] * xx + (freq * np.sin(angle))[..., None, None] * yy
    img = (amp[..., None, None] * np.cos(arg + phase[..., None, None])).sum(2)      # (B, C, S, S)
    img /= np.abs(img).max(axis=(2, 3), keepdims=True)
    return np.ascontiguousarray(img.transpose(0, 2, 3, 1), dtype=np.float32)      # (B, S, S, C)


def make_train_batch(cfg: DiffusionConfig, batch: int, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One seeded step of Algorithm 1's data: x0 = make_images (B, H, W, C) float32,
    t uniform in [0, T) int32 (B,), noise ~ N(0, I) (B, H, W, C) float32."""
    x0 = make_images(cfg, batch, seed)
    rng = np.random.default_rng([seed, 1])
    t = rng.integers(0, cfg.schedule.num_timesteps, batch, dtype=np.int32)
    noise = rng.standard_normal(x0.shape, dtype=np.float32)
    return x0, t, noise


def make_noise(cfg: DiffusionConfig, shape_prefix: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Seeded N(0, I) float32 of shape shape_prefix + (H, W, C): x_T is make_noise(cfg, (B,)),
    the ancestral sampler's per-step draws make_noise(cfg, (steps, B))."""
    S = cfg.image_size
    return np.random.default_rng([seed, 2]).standard_normal(
        (*shape_prefix, S, S, cfg.in_channels), dtype=np.float32)


# ----------------------------------------------------------------------------- FLOPs

def _block_macs(b: Block, temb_ch: int) -> int:
    """Multiply-accumulates of one image through block b: every conv and dense weight does
    one MAC per output pixel; attention adds q k^T and (softmax) v, each N*N*C (N = H*W)."""
    n = b.res * b.res
    if b.kind == "dense":
        return b.cin * b.cout
    if b.kind in ("conv", "downsample", "upsample"):
        return n * 9 * b.cin * b.cout
    if b.kind == "resnet":
        macs = n * 9 * b.cin * b.cout + temb_ch * b.cout + n * 9 * b.cout * b.cout
        return macs + (n * b.cin * b.cout if b.cin != b.cout else 0)
    if b.kind == "attn":
        return 4 * n * b.cin * b.cin + 2 * n * n * b.cin
    return 0  # norm


def forward_flops(cfg: DiffusionConfig, batch: int) -> float:
    """Model FLOPs of one UNet forward pass over `batch` images: 2 x the multiply-accumulates
    of every conv, dense layer and attention matmul (the convention of Kaplan et al. 2020,
    Sec. 2.1, and of nanoGPT's / PaLM's MFU: 2 FLOPs per MAC, elementwise work such as
    GroupNorm, SiLU, softmax, additions and upsampling not counted). A training step counts
    3x this (backward = 2x forward, Kaplan et al.), see `train_flops`."""
    return 2.0 * batch * sum(_block_macs(b, cfg.temb_ch) for b in unet_blocks(cfg))


def train_flops(cfg: DiffusionConfig, batch: int) -> float:
    return 3.0 * forward_flops(cfg, batch)


# ----------------------------------------------------------------------------- 3. process

def _per_image(coef: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Gather schedule coefficients at t (B,) and shape them to broadcast over NHWC."""
    return coef[t][:, None, None, None]                                # (B, 1, 1, 1)


def q_sample(sched: Schedule, x0: np.ndarray, t: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise (eq. 4), float64."""
    assert x0.shape == noise.shape and t.shape == (x0.shape[0],)
    return (_per_image(sched.sqrt_alphas_cumprod, t) * x0
            + _per_image(sched.sqrt_one_minus_alphas_cumprod, t) * noise)


EpsFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def training_loss(eps_fn: EpsFn, sched: Schedule, x0: np.ndarray, t: np.ndarray,
                  noise: np.ndarray) -> float:
    """Algorithm 1's loss: the mean over all B*H*W*C elements of
    (noise - eps_theta(q_sample(x0, t, noise), t))^2."""
    eps = eps_fn(q_sample(sched, x0, t, noise), t)
    assert eps.shape == noise.shape
    return float(np.mean((np.asarray(noise, np.float64) - eps) ** 2))


def respaced_timesteps(sched: Schedule, steps: int) -> np.ndarray:
    """The sampler's timesteps tau_0 < ... < tau_{S-1}: tau_i = floor(i * T / S), DDIM's
    "uniform" selection (range(0, T, T // S) when S divides T), so tau_0 = 0 and with S = T
    every timestep. T = 1000, S = 10: 0, 100, ..., 900. int32 (S,)."""
    T = sched.num_timesteps
    if not isinstance(steps, (int, np.integer)) or not 1 <= steps <= T:
        raise FwbenchError(f"sampler steps must be an integer in 1..{T}, got {steps!r}")
    return (np.arange(steps, dtype=np.int64) * T // steps).astype(np.int32)


def sampler_coefficients(sched: Schedule, method: str, steps: int) -> dict[str, np.ndarray]:
    """Every sampler step as one linear update, so a framework can run one compiled loop:

        x_prev = a[s] * x + b[s] * eps_theta(x, t[s]) + c[s] * z[s],   s = 0 .. S-1

    in iteration order (t descending from tau_{S-1} to tau_0 = 0), z[s] ~ N(0, I) supplied
    by the caller. Returns t (S,) int32 and a, b, c (S,) float64 (frameworks cast to float32).

    With abar_i = alphas_cumprod[tau_i] and abar_{-1} = 1, the respaced process has
    beta'_i = 1 - abar_i / abar_{i-1}, alpha'_i = 1 - beta'_i.
    "ddpm": ancestral sampling, Algorithm 2 on the respaced process (exactly Algorithm 2
        when S = T): x_prev = (x - beta'_i / sqrt(1 - abar_i) eps) / sqrt(alpha'_i) + sigma_i z,
        sigma_i^2 = beta'_i (the CIFAR-10 model's "fixedlarge"), no clipping of the
        predicted x0, and z = 0 (c = 0) on the last step.
    "ddim": DDIM with eta = 0 (Song et al. 2021, eq. 12), deterministic (c = 0):
        x_prev = sqrt(abar_{i-1}) x0_hat + sqrt(1 - abar_{i-1}) eps,
        x0_hat = (x - sqrt(1 - abar_i) eps) / sqrt(abar_i).
    """
    choose("sampler", method, SAMPLERS)
    tau = respaced_timesteps(sched, steps)
    abar = sched.alphas_cumprod[tau]                                     # abar_i
    abar_prev = np.append(1.0, abar[:-1])                                # abar_{i-1}
    if method == "ddpm":
        beta = 1.0 - abar / abar_prev                                    # beta'_i
        a = 1.0 / np.sqrt(1.0 - beta)
        b = -beta / np.sqrt(1.0 - abar) * a
        c = np.sqrt(beta)
        c[0] = 0.0                                                       # tau_0: no noise
    else:
        a = np.sqrt(abar_prev / abar)
        b = np.sqrt(1.0 - abar_prev) - np.sqrt(abar_prev) * np.sqrt(1.0 - abar) / np.sqrt(abar)
        c = np.zeros(steps)
    rev = slice(None, None, -1)                                          # iteration order
    return {"t": tau[rev].copy(), "a": a[rev].copy(), "b": b[rev].copy(), "c": c[rev].copy()}


def p_sample_loop(eps_fn: EpsFn, coefs: dict[str, np.ndarray], x_T: np.ndarray,
                  noise: np.ndarray | None = None) -> np.ndarray:
    """Run the sampler from x_T (B, H, W, C): x <- a x + b eps_fn(x, t) + c z for each step,
    z = noise[s] of noise (S, B, H, W, C) (may be None when every c is 0). float64."""
    x = np.asarray(x_T, np.float64)
    S, B = len(coefs["t"]), x.shape[0]
    if noise is None and np.any(coefs["c"] != 0):
        raise FwbenchError("the ddpm sampler needs noise of shape (steps, B, H, W, C)")
    if noise is not None and noise.shape != (S, *x.shape):
        raise FwbenchError(f"sampler noise must have shape {(S, *x.shape)}, got {noise.shape}")
    for s in range(S):
        t = np.full(B, coefs["t"][s], np.int32)
        x = coefs["a"][s] * x + coefs["b"][s] * eps_fn(x, t)
        if coefs["c"][s] != 0:
            x = x + coefs["c"][s] * noise[s]
    return x


# ----------------------------------------------------------------------------- tasks

POOL = 4  # input sets rotated through the timed rounds


def strategies(framework: str, mode: str, task: str) -> tuple[str | None, ...]:
    """The case variants (records' `strategy`): as for gpt (workloads.base.train_step_strategies)."""
    return train_step_strategies(framework, mode, task)


def task_spec(cfg: DiffusionConfig, batch: int, task: str, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """forward: eps(x_t, t) on noised images; train_step: Algorithm 1 + one AdamW step;
    sample: DDIM (eta 0) over SAMPLE_STEPS steps from x_T. items = images. The same for
    every strategy."""
    choose("diffusion task", task, TASKS)
    S = cfg.image_size
    shape = f"B={batch},{S}x{S}"
    if task == "forward":
        sets = []
        for i in range(POOL):
            x0, t, noise = make_train_batch(cfg, batch, seed + i)
            sets.append((q_sample(cfg.schedule, x0, t, noise).astype(np.float32), t))
        return TaskSpec(task, "eps", tuple(sets), batch, "images", forward_flops(cfg, batch), shape)
    if task == "train_step":
        return TaskSpec(task, "train_step", tuple(make_train_batch(cfg, batch, seed + i) for i in range(POOL)),
                        batch, "images", train_flops(cfg, batch), shape,
                        note="Algorithm 1 loss, AdamW step, params updated in place", mutates=True)
    return TaskSpec(task, "sample", tuple((make_noise(cfg, (batch,), seed + i),) for i in range(POOL)),
                    batch, "images", SAMPLE_STEPS * forward_flops(cfg, batch),
                    f"{shape},steps={SAMPLE_STEPS}", kwargs={"method": "ddim", "steps": SAMPLE_STEPS},
                    note="DDIM eta=0, uniform timestep spacing")


# ----------------------------------------------------------------------------- interface

@runtime_checkable
class DiffusionModel(Protocol):
    """What every framework's DDPM implements (frameworks/<fw>/diffusion.py, `build`).

    Arrays in and out are the framework's own, made from numpy by the adapter's `asarray`
    (outside any timed region); `adapter.to_numpy` turns results back. Images are NHWC
    float32 at this interface whatever layout the framework computes in.

    build(adapter, config, params, case) -> DiffusionModel
    """
    config: DiffusionConfig
    mode: str
    device: str

    def eps(self, x: Any, t: Any) -> Any:
        """The denoiser eps_theta: x (B, H, W, C) float32, t (B,) int32 -> (B, H, W, C) float32."""

    def loss(self, x0: Any, t: Any, noise: Any) -> Any:
        """Algorithm 1's loss, a float32 scalar: mean((noise - eps(x_t, t))^2) over all
        elements, x_t = sqrt_alphas_cumprod[t] x0 + sqrt_one_minus_alphas_cumprod[t] noise
        with the schedule's coefficients cast to float32."""

    def grads(self, x0: Any, t: Any, noise: Any) -> dict[str, Any]:
        """Gradient of `loss` for every parameter, keyed by the numpy names, in the numpy
        layout (HWIO convs)."""

    def train_step(self, x0: Any, t: Any, noise: Any) -> Any:
        """One AdamW step (OPTIMIZER, clipping at global norm 1) on the model's own parameters
        and optimizer state; returns the loss before the step."""

    def sample(self, x_T: Any, noise: Any = None, *, method: str = "ddim", steps: int = SAMPLE_STEPS) -> Any:
        """x_0 from x_T (B, H, W, C) by `steps` updates with sampler_coefficients(config.schedule,
        method, steps) (a, b, c as float32): x <- a x + b eps(x, t) + c noise[s]. "ddpm" needs
        noise (steps, B, H, W, C) float32, so every framework follows the same trajectory;
        "ddim" needs none."""

    def export_params(self) -> dict[str, np.ndarray]:
        """The current parameters, back in the numpy layout of `init_params`."""


# ----------------------------------------------------------------------------- reference

def timestep_frequencies(dim: int) -> np.ndarray:
    """The timestep embedding's frequencies f_k = exp(-log(10000) k / (dim/2 - 1)), float64.
    Frameworks round them once to float32, so no framework's float32 exp can make them differ."""
    half = dim // 2
    return np.exp(-math.log(10000.0) * np.arange(half) / (half - 1))


def timestep_embedding(t: np.ndarray, dim: int) -> np.ndarray:
    """DDPM's get_timestep_embedding: (B,) -> (B, dim), [sin(t f), cos(t f)],
    f_k = exp(-log(10000) k / (dim/2 - 1)), k = 0 .. dim/2 - 1. float64."""
    arg = np.asarray(t, np.float64)[:, None] * timestep_frequencies(dim)[None, :]   # (B, dim/2)
    return np.concatenate([np.sin(arg), np.cos(arg)], axis=1)


def silu(x: np.ndarray) -> np.ndarray:
    return x * 0.5 * (1.0 + np.tanh(0.5 * x))                             # x * sigmoid(x), no overflow


def _conv(p: dict[str, np.ndarray], name: str, x: np.ndarray, stride: int = 1) -> np.ndarray:
    """2-D convolution (cross-correlation, as every framework defines it) of NHWC x with the
    HWIO weight `name.weight`, zero padding (k-1)/2 on every side, then the bias."""
    w = p[name + ".weight"]                                                # (kh, kw, Cin, Cout)
    k, (_, H, W, _) = w.shape[0], x.shape
    x = np.pad(x, ((0, 0), (k // 2, k // 2), (k // 2, k // 2), (0, 0)))
    Ho, Wo = (H - 1) // stride + 1, (W - 1) // stride + 1
    out = p[name + ".bias"]
    for i in range(k):              # one matmul per kernel tap: out[y, x] += in[s*y + i, s*x + j] @ w[i, j]
        for j in range(k):
            out = out + x[:, i:i + stride * Ho:stride, j:j + stride * Wo:stride] @ w[i, j]
    return out                                                             # (B, Ho, Wo, Cout)


def _group_norm(p: dict[str, np.ndarray], name: str, x: np.ndarray, groups: int) -> np.ndarray:
    B, H, W, C = x.shape
    g = x.reshape(B, H, W, groups, C // groups)                            # contiguous channel groups
    mu = g.mean(axis=(1, 2, 4), keepdims=True)
    var = ((g - mu) ** 2).mean(axis=(1, 2, 4), keepdims=True)
    g = (g - mu) / np.sqrt(var + GN_EPS)
    return g.reshape(B, H, W, C) * p[name + ".weight"] + p[name + ".bias"]


def _resnet(cfg: DiffusionConfig, p: dict[str, np.ndarray], name: str, x: np.ndarray,
            temb: np.ndarray) -> np.ndarray:
    G = cfg.num_groups
    h = _conv(p, name + ".conv1", silu(_group_norm(p, name + ".norm1", x, G)))
    proj = silu(temb) @ p[name + ".temb_proj.weight"] + p[name + ".temb_proj.bias"]   # (B, Cout)
    h = h + proj[:, None, None, :]
    h = _conv(p, name + ".conv2", silu(_group_norm(p, name + ".norm2", h, G)))
    if name + ".nin_shortcut.weight" in p:
        x = _conv(p, name + ".nin_shortcut", x)
    return x + h


def _attn(cfg: DiffusionConfig, p: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    B, H, W, C = x.shape
    h = _group_norm(p, name + ".norm", x, cfg.num_groups)
    q, k, v = (_conv(p, f"{name}.{n}", h).reshape(B, H * W, C) for n in ("q", "k", "v"))  # (B, N, C)
    w = q @ k.transpose(0, 2, 1) * C ** -0.5                               # (B, N, N): query, key
    w = np.exp(w - w.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    h = (w @ v).reshape(B, H, W, C)
    return x + _conv(p, name + ".proj_out", h)


def reference_eps(cfg: DiffusionConfig, params: dict[str, np.ndarray], x: np.ndarray,
                  t: np.ndarray) -> np.ndarray:
    """Numpy float64 UNet forward eps_theta(x, t): the ground truth the frameworks are
    tested against. x (B, H, W, C), t (B,) int -> (B, H, W, C)."""
    cfg.check_images(x, dtypes=("float32", "float64"))
    cfg.check_timesteps(t, x.shape[0])
    p = {k: v.astype(np.float64) for k, v in params.items()}
    L = len(cfg.ch_mult)
    temb = timestep_embedding(t, cfg.ch)                                   # (B, ch)
    temb = temb @ p["temb.dense.0.weight"] + p["temb.dense.0.bias"]
    temb = silu(temb) @ p["temb.dense.1.weight"] + p["temb.dense.1.bias"]  # (B, 4ch)
    hs = [_conv(p, "conv_in", np.asarray(x, np.float64))]                  # (B, S, S, ch)
    for i in range(L):
        for j in range(cfg.num_res_blocks):
            h = _resnet(cfg, p, f"down.{i}.block.{j}", hs[-1], temb)
            if h.shape[1] in cfg.attn_resolutions:
                h = _attn(cfg, p, f"down.{i}.attn.{j}", h)
            hs.append(h)
        if i != L - 1:
            hs.append(_conv(p, f"down.{i}.downsample.conv", hs[-1], stride=2))   # (B, H/2, W/2, C)
    h = hs[-1]
    h = _resnet(cfg, p, "mid.block_1", h, temb)
    h = _attn(cfg, p, "mid.attn_1", h)
    h = _resnet(cfg, p, "mid.block_2", h, temb)
    for i in reversed(range(L)):
        for j in range(cfg.num_res_blocks + 1):
            h = _resnet(cfg, p, f"up.{i}.block.{j}", np.concatenate([h, hs.pop()], axis=-1), temb)
            if h.shape[1] in cfg.attn_resolutions:
                h = _attn(cfg, p, f"up.{i}.attn.{j}", h)
        if i != 0:
            h = h.repeat(2, axis=1).repeat(2, axis=2)                      # nearest, (B, 2H, 2W, C)
            h = _conv(p, f"up.{i}.upsample.conv", h)
    assert not hs
    h = silu(_group_norm(p, "norm_out", h, cfg.num_groups))
    return _conv(p, "conv_out", h)                                         # (B, S, S, in_channels)


def reference_loss(cfg: DiffusionConfig, params: dict[str, np.ndarray], x0: np.ndarray,
                   t: np.ndarray, noise: np.ndarray) -> float:
    return training_loss(lambda x, tt: reference_eps(cfg, params, x, tt), cfg.schedule, x0, t, noise)


def reference_sample(cfg: DiffusionConfig, params: dict[str, np.ndarray], x_T: np.ndarray,
                     noise: np.ndarray | None = None, method: str = "ddim",
                     steps: int = SAMPLE_STEPS) -> np.ndarray:
    coefs = sampler_coefficients(cfg.schedule, method, steps)
    return p_sample_loop(lambda x, t: reference_eps(cfg, params, x, t), coefs, x_T, noise)


# What every framework's build returns: tests/test_conformance.py checks each against it.
MODEL = DiffusionModel
