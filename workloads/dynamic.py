"""Dynamic shapes, framework-free: seeded streams of requests whose shapes vary, the
strategies each framework has for them, and the references their outputs must match.

A case is (stream, strategy) under one framework and mode. Its timing policy is the cold
stream (docs/ARCHITECTURE.md, "Dynamic shapes"): on a fresh model every request is timed
alone in arrival order, with the compilation counter read after each, so the first
request of a new shape can be told from a seen one; then whole warm passes (every shape
seen) are timed as rounds. The harness does this for any TaskSpec with a `stream`
(workloads.base.Stream; frameworks/harness/timing.py: time_stream).

Streams (this module):
    prefill     GPT serving: `requests` prompts (batch 1 each) whose lengths follow a seeded,
                skewed distribution over min_len..block_size with many distinct values; the
                task is the logits of each prompt's last position.
    generate    GPT serving: the first generate_requests of the same lengths, clipped to
                block_size - new_tokens; each request decodes new_tokens greedily (the
                framework's cached decoding, started at the real last position); checked token
                for token against float64 greedy decoding whose choices are all clear of
                float32 rounding (GREEDY_MARGIN).
    train       GPT training: train_requests batches of train_batch sequences, lengths from
                the same distribution; each request is one loss-and-gradients computation
                (no optimizer step: its work does not depend on the length, and requests stay
                independent, each checkable): the loss against the float64 loss, the
                gradients by their derivative along a seeded unit direction against a float64
                finite difference (independent of every framework's autodiff).
    ddpm        the DDPM UNet denoiser eps(x_t, t) (the `diffusion_preset` UNet) on
                `image_requests` batches whose resolution (`resolutions`, each a multiple of
                the UNet's downsampling factor) and batch size (`image_batches`; the presets
                include batch 1, which Dynamo specialises like 0) vary: every (batch,
                resolution) pair once, then seeded repeats, in a seeded order. Sized for the
                CPU: torch.compile takes ~30 s per UNet graph here (docs/ARCHITECTURE.md).
    prefill_int the prefill stream with the length as a Python int: every request is the prompt
                right-padded to the block size plus its real length, and the model slices
                tokens[:, :length] inside the compiled function (Dynamo specialises ints, JAX
                needs the int static, TensorFlow retraces per Python value), instead of reading
                the length from the tensor's shape.

Strategies (records' `strategy`; None is each framework and mode's default):
    eager          None           op by op, each request at its own length
    torch compiled None           torch.compile(dynamic=None): automatic dynamic (the default:
                                  static first, then a dynamic graph after a shape changes)
                   static         torch.compile(dynamic=False): a graph per length, up to
                                  torch._dynamo.config.recompile_limit, then eager (a warning)
                   dynamic        torch.compile(dynamic=True): symbolic lengths from the start
                   mark_dynamic   torch._dynamo.mark_dynamic on the length dimension (ddpm:
                                  maybe_mark_dynamic on the batch and both image dimensions)
    jax compiled   None           jax.jit: a trace and an XLA compile per distinct shape
                   export         jax.export with a symbolic length (ddpm: batch b and size f*s,
                                  f the downsampling factor): one trace, then (measured) what
                                  each concrete shape costs
    tf graph / compiled (tf.function without / with jit_compile)
                   None           tf.function: a trace per new shape
                   input_signature  a TensorSpec with None dims: one trace (XLA may still
                                  compile per concrete shape: measured)
                   reduce_retracing  tf.function(reduce_retracing=True)
    every mode     bucketed       framework-neutral: each sequence right-padded to the next
                                  power of two (bucket), the real last position passed as an
                                  index, so only the bucket count compiles; causal attention
                                  keeps the padding out of every real position, generate's
                                  decode steps overwrite the padding's cache entries before
                                  attending to them, train weights padded targets 0. For ddpm only
                                  the batch is bucketed (next power of two, zero images appended,
                                  the real rows compared): padding pixels is not exact for a
                                  UNet (3x3 convolutions read the padding at the border, and
                                  GroupNorm's statistics run over every pixel), while GroupNorm
                                  and every other layer act per image, so extra rows change no
                                  real row. padding_waste counts pixels computed vs needed.
    prefill_int    the length is a Python int, so: torch None / static / dynamic (no tensor
                   dimension varies: mark_dynamic has nothing to mark), jax None (jit without
                   static arguments: refused, recorded unsupported with JAX's error) and static
                   (jit with static_argnums: a compile per value), TensorFlow None and
                   reduce_retracing (a trace per Python value; an input_signature cannot hold
                   a Python int). Records recompile_limit_hit.
A framework without one of these strategies records it `unsupported` with the reason.

Every request is a PrefillModel method (below): `prefill(tokens (B, T) int32, last (B,) int32)
-> (B, vocab) float32`, the logits at position last[b] of row b (T - 1 unless padded);
`generate(tokens, last) -> (B, new_tokens)`; `train(tokens, targets, weights) -> {"loss",
**gradients}`; `prefill_int(tokens (B, block) int32, length: int) -> (B, vocab)`, the
logits at length - 1; `eps(x (B, S, S, C) float32, t (B,) int32) -> (B, S, S, C)`
(workloads.diffusion's denoiser; attention blocks where the parameter set has them, i.e.
at the same UNet levels at every resolution).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from workloads import diffusion, gpt
from workloads.base import (
    FwbenchError,
    Model,
    Preset,
    Stream,
    TaskSpec,
    Unsupported,
    check_positive,
    choose,
    dtype_name,
    fixed_tasks,
    host_values,
    no_device_strategies,
    replace_config,
    shape_of,
)
from workloads.base import (
    check_inputs as _check_inputs,
)
from workloads.record import not_its_api

NAME = "dynamic"
# Its strategies (bucketing, dynamic shapes, signatures, export) are what it
# compares, not optional variants: every `--variants` setting runs them all.
OPTIONAL_VARIANTS = False
device_strategies = no_device_strategies
TASKS = ("prefill", "generate", "train", "ddpm", "prefill_int")
tasks = fixed_tasks(TASKS)
# The ddpm stream's outputs against the float64 reference: the diffusion forward tolerance of
# the equivalence tests (tests/support/equivalence.py: TOL[("forward", "diffusion")]).
DDPM_TOLERANCE = 8e-5
# prefill_int: the length is a Python int, so only these strategies mean something.
INT_STRATEGIES = ("static", "dynamic", "input_signature", "reduce_retracing")
UNET_PREFIX = "unet/"   # init_params: the ddpm stream's UNet parameters, beside the GPT's
# Outputs on the real positions must equal the unpadded eager result within the GPT forward
# tolerance of the equivalence tests (tests/support/equivalence.py: TOL[("forward", "gpt")]).
TOLERANCE = 3e-5
# A generate reference is used only where every step's top-2 logit margin is at least this
# fraction of the logits' norm: a float32 forward within TOLERANCE moves no logit by more than
# TOLERANCE * norm, so it cannot swap the top two, and its tokens must equal the reference's.
GREEDY_MARGIN = 2 * TOLERANCE
# train: the loss and the gradient's directional derivative, at the GPT tolerances of the
# equivalence tests (tests/support/equivalence.py: TOL[("loss", "gpt")], TOL[("grad_fd", "gpt")]).
LOSS_TOLERANCE = 1e-6
GRAD_FD_TOLERANCE = 6e-5
FD_H = 1e-3     # step of the 4th-order central difference along a unit direction (float64)
COMPILED_STRATEGIES = ("static", "dynamic", "mark_dynamic", "export", "input_signature", "reduce_retracing",
                       "bucketed")
GRAPH_STRATEGIES = ("input_signature", "reduce_retracing", "bucketed")


@dataclass(frozen=True)
class DynamicConfig:
    gpt_preset: str = "small"   # the model every request runs (workloads.gpt presets)
    requests: int = 64          # requests per stream
    min_len: int = 8            # shortest prompt
    batch: int = 1              # prompts per request
    new_tokens: int = 8         # generate: tokens each request decodes greedily
    generate_requests: int = 4  # generate: the first this many prompts (sized for the CPU budget)
    train_requests: int = 3     # train: batches in the stream
    int_requests: int = 12      # prefill_int: the first this many prompts (enough distinct lengths
                                # to pass Dynamo's recompile limit of 8)
    train_batch: int = 4        # train: sequences per batch

    # the ddpm stream
    diffusion_preset: str = "tiny"                          # the UNet (workloads.diffusion presets)
    # Sized for the CPU budget: torch.compile takes 20-30 s per UNet graph here, so 4 (batch,
    # resolution) pairs, 4 bucketed (batch buckets 1 and 4).
    resolutions: tuple[int, ...] = (16, 32)                 # image sizes, square
    image_batches: tuple[int, ...] = (1, 3)                 # images per request
    image_requests: int = 6                                 # requests of the ddpm stream

    def __post_init__(self) -> None:
        check_positive(self, "requests", "min_len", "batch", "new_tokens", "generate_requests", "train_requests",
                       "train_batch", "image_requests", "int_requests")
        for name in ("generate_requests", "int_requests"):
            if getattr(self, name) > self.requests:
                raise FwbenchError(f"{name} {getattr(self, name)} must be at most requests {self.requests}: "
                                   f"{name.split('_')[0]} serves the first prompts of the prefill stream")
        gpt.preset(self.gpt_preset)
        if self.min_len + self.new_tokens > self.gpt.block_size:
            raise FwbenchError(f"min_len {self.min_len} + new_tokens {self.new_tokens} exceeds the block size "
                               f"{self.gpt.block_size}")
        diffusion.preset(self.diffusion_preset)
        for name in ("resolutions", "image_batches"):
            v = getattr(self, name)
            if not v or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in v):
                raise FwbenchError(f"DynamicConfig.{name} must be a non-empty tuple of positive integers, got {v!r}")
        for S in self.resolutions:
            self.unet_at(S)        # refuses a resolution the UNet cannot halve at every level
        if self.image_requests < len(self.resolutions) * len(self.image_batches):
            raise FwbenchError(f"image_requests ({self.image_requests}) must be at least the number of (batch, "
                               f"resolution) pairs ({len(self.resolutions) * len(self.image_batches)}): "
                               "each comes once")

    @property
    def unet(self) -> diffusion.DiffusionConfig:
        return diffusion.preset(self.diffusion_preset).config

    def unet_at(self, size: int) -> diffusion.DiffusionConfig:
        """The stream's UNet at `size` x `size` pixels: the same parameters, with attention at
        the same levels (attn_resolutions scaled with the image), so the reference and the
        frameworks' input checks take that size."""
        cfg = self.unet
        levels = [i for i, r in enumerate(cfg.resolutions) if r in cfg.attn_resolutions]
        try:
            return replace_config(cfg, image_size=size, attn_resolutions=tuple(size >> i for i in levels))
        except FwbenchError as e:
            raise FwbenchError(f"ddpm stream resolution {size}: {e}") from None

    def batch_buckets(self) -> tuple[int, ...]:
        """Powers of two up to the first one >= the largest batch: the ddpm stream's buckets."""
        out = [1]
        while out[-1] < max(self.image_batches):
            out.append(out[-1] * 2)
        return tuple(out)

    @property
    def gpt(self) -> gpt.GPTConfig:
        return gpt.preset(self.gpt_preset).config

    # -- input rules: checked at the Python entry of every PrefillModel method, before any
    # compiled code (a value inside jit or tf.function is abstract), the same in every
    # framework (tests/test_bad_sizes.py). Before them JAX clamped what torch and TensorFlow
    # refused: a `last` past the prompt read the last position, prefill_int's length -3 gave
    # length 29's result and 40 length 32's, generate past the block returned tokens.
    def check_prefill(self, tokens: Any, last: Any) -> None:
        """prefill's inputs: tokens as every GPT method takes them (GPTConfig.check_tokens),
        and last (B,) integers, each a position of its row: 0 <= last < T (B ints read from a
        host copy)."""
        self.gpt.check_tokens(tokens)
        B, T = shape_of(tokens)
        dt = dtype_name(last)
        if shape_of(last) != (B,) or not dt.startswith(("int", "uint")):
            raise FwbenchError(f"last must be integers of shape ({B},), got {dt} {shape_of(last)}")
        v = host_values(last)
        if v.min() < 0 or v.max() >= T:
            raise FwbenchError(f"last must be positions of the prompt, in 0..{T - 1}, got {v.min()}..{v.max()}")

    def check_generate(self, tokens: Any, last: Any) -> None:
        """generate's inputs: as prefill's, every row the same length (one decode position),
        and the prompt (last + 1 tokens) and its new_tokens within the block, as
        GPTConfig.check_generate asks of the GPT's own generate."""
        self.check_prefill(tokens, last)
        v = host_values(last)
        if v.min() != v.max():
            raise FwbenchError(f"last must be the same in every row (one decode position), got {v.min()}..{v.max()}")
        if int(v[0]) + 1 + self.new_tokens > self.gpt.block_size:
            raise FwbenchError(f"prompt length {int(v[0]) + 1} + new_tokens {self.new_tokens} must be at most "
                               f"block_size {self.gpt.block_size}")

    def check_train(self, tokens: Any, targets: Any, weights: Any) -> None:
        """train's inputs: tokens and targets as GPTConfig.check_batch takes them, and
        weights of their shape, float32, non-negative, with a positive sum (the loss divides
        by it)."""
        self.gpt.check_batch(tokens, targets)
        if shape_of(weights) != shape_of(tokens) or dtype_name(weights) != "float32":
            raise FwbenchError(f"weights must be float32 of the tokens' shape {shape_of(tokens)}, "
                               f"got {dtype_name(weights)} {shape_of(weights)}")
        w = host_values(weights)
        if not (w.min() >= 0 and w.sum() > 0):
            raise FwbenchError(f"weights must be non-negative with a positive sum, got {w.min()}..{w.max()} "
                               f"(sum {w.sum()})")

    def check_eps(self, x: Any, t: Any) -> None:
        """The ddpm stream's inputs: images of any size the UNet takes (unet_at) and their
        timesteps, as DiffusionConfig.check_eps_inputs takes them at that size."""
        shape = shape_of(x)
        self.unet_at(shape[1] if len(shape) == 4 else self.unet.image_size).check_eps_inputs(x, t)

    def check_length(self, tokens: Any, length: Any) -> None:
        """prefill_int's inputs: tokens as every GPT method takes them, and the real length a
        Python int in 1..T (the padded prompt's length)."""
        self.gpt.check_tokens(tokens)
        self.check_int_length(shape_of(tokens)[1], length)

    def check_int_length(self, T: int, length: Any) -> None:
        """prefill_int's own check (a Python int; JAX clamped a wrong one silently: -3 gave
        length 29's logits): the real length in 1..T."""
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or not 1 <= length <= T:
            raise FwbenchError(f"length must be a Python int in 1..{T} (the prompt's tokens), got {length!r}")

    def buckets(self) -> tuple[int, ...]:
        """Powers of two from the first one >= min_len, the last one the block size."""
        b, out = 1, []
        while b < self.gpt.block_size:
            if b >= self.min_len:
                out.append(b)
            b *= 2
        return (*out, self.gpt.block_size)


# Each method's input rule (workloads.base.check_inputs): where inputs are made, never in a call.
INPUT_RULES: dict[str, Any] = {
    "prefill": lambda cfg, tokens, last: cfg.check_prefill(tokens, last),
    "generate": lambda cfg, tokens, last: cfg.check_generate(tokens, last),
    "train": lambda cfg, tokens, targets, weights: cfg.check_train(tokens, targets, weights),
    "eps": lambda cfg, x, t: cfg.check_eps(x, t),
    "prefill_int": lambda cfg, tokens, length: cfg.check_length(tokens, length),
}


def check_inputs(cfg: DynamicConfig, method: str, /, *args: Any, **kwargs: Any) -> None:
    """The dynamic-shape models' input rules for `method`'s arguments, one line."""
    _check_inputs(INPUT_RULES, cfg, method, args, kwargs)


PRESETS: dict[str, Preset] = {
    "tiny": Preset("tiny", DynamicConfig(gpt_preset="tiny", requests=12, new_tokens=4, generate_requests=12,
                                         train_requests=8, train_batch=2, resolutions=(8, 12), image_batches=(1, 3),
                                         image_requests=6), batch=1, note="for tests"),
    # Every distinct shape costs every compiled case a compile (3-15 s each here for torch,
    # more for a train step or a UNet), so the streams' sizes set the matrix's time: `full`
    # (the sizes: 64 prompts) took 37 minutes for the whole dynamic matrix on the
    # 2-core CPU; `small` keeps it within 20 (docs/ARCHITECTURE.md, "Dynamic shapes").
    "small": Preset("small", DynamicConfig(gpt_preset="small", requests=32), batch=1,
                    note="CPU preset: 32 prefill requests, prompts of 8..128 tokens (25 distinct); prefill_int: "
                         "the first 12; generate: the first 4, 8 new tokens each; train: 3 batches of 4; "
                         "ddpm: 6 requests of 1 or 3 images at 16 or 32 pixels (the tiny UNet)"),
    "full": Preset("full", DynamicConfig(gpt_preset="small", requests=64, generate_requests=10, train_requests=6,
                                         int_requests=64, resolutions=(16, 32, 48), image_batches=(1, 3, 4),
                                         image_requests=18), batch=1,
                   note="the issue's sizes: 64 prefill and prefill_int requests (44 distinct lengths), "
                        "generate 10, train 6 batches, ddpm 18 requests at 16, 32 or 48 pixels; ~40 min on 2 cores"),
}


def preset(name: str) -> Preset:
    return PRESETS[choose("dynamic preset", name, PRESETS)]


def init_params(config: DynamicConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """The GPT's parameters and, under UNET_PREFIX, the ddpm stream's UNet's (split_params
    parts them again: the harness hands a model one dict)."""
    return {**gpt.init_params(config.gpt, seed),
            **{UNET_PREFIX + k: v for k, v in _unet_params(config.unet, seed).items()}}


def split_params(params: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """init_params' dict -> (GPT parameters, UNet parameters)."""
    n = len(UNET_PREFIX)
    return ({k: v for k, v in params.items() if not k.startswith(UNET_PREFIX)},
            {k[n:]: v for k, v in params.items() if k.startswith(UNET_PREFIX)})


def prompt_lengths(config: DynamicConfig, seed: int = 0, n: int | None = None) -> list[int]:
    """Seeded prompt lengths in arrival order, skewed towards short prompts as chat and
    completion traffic is (a Beta(1.5, 4) over min_len..block_size: median near a quarter of
    the range, a long tail up to the block size), so most lengths are distinct. n: how many
    (config.requests by default)."""
    lo, hi = config.min_len, config.gpt.block_size
    u = np.random.default_rng(seed + 7).beta(1.5, 4.0, config.requests if n is None else n)
    return [int(lo + np.floor(x * (hi - lo + 1))) for x in np.minimum(u, 1 - 1e-9)]


def bucket_of(config: DynamicConfig, length: int) -> int:
    """The bucket (DynamicConfig.buckets) a sequence of `length` tokens is padded to: the
    first at least that long; a length in 1..block_size, else FwbenchError."""
    if not 1 <= length <= config.gpt.block_size:
        raise FwbenchError(f"sequence length {length} must be in 1..block_size ({config.gpt.block_size}): "
                           f"the buckets are {', '.join(map(str, config.buckets()))}")
    return next(b for b in config.buckets() if b >= length)


def prompt(config: DynamicConfig, seed: int, i: int) -> np.ndarray:
    """Request i's prompt tokens (batch, length), int32, seeded."""
    return gpt.make_batch(config.gpt, config.batch, seed + 100 + i, seq_len=prompt_lengths(config, seed)[i])[0]


@lru_cache(maxsize=1024)
def reference(config: DynamicConfig, seed: int, i: int) -> np.ndarray:
    """Request i's output, numpy float64, unpadded: the logits of each prompt's last position
    (kept: every case of a stream compares with the same references)."""
    return gpt.reference_logits(config.gpt, _params(config.gpt, seed), prompt(config, seed, i))[:, -1]


@lru_cache(maxsize=4)
def _params(cfg: gpt.GPTConfig, seed: int) -> dict[str, np.ndarray]:
    return gpt.init_params(cfg, seed)


@lru_cache(maxsize=4)
def _unet_params(cfg: diffusion.DiffusionConfig, seed: int) -> dict[str, np.ndarray]:
    return diffusion.init_params(cfg, seed)


def image_shapes(config: DynamicConfig, seed: int = 0) -> list[tuple[int, int]]:
    """The ddpm stream's (batch, resolution) per request in arrival order: every pair once
    and seeded repeats of them, shuffled with the seed (so batch 1 always comes, and every
    shape is seen again later)."""
    pairs = [(B, S) for B in config.image_batches for S in config.resolutions]
    rng = np.random.default_rng(seed + 11)
    extra = [pairs[i] for i in rng.integers(0, len(pairs), config.image_requests - len(pairs))]
    order = rng.permutation(len(pairs) + len(extra))
    return [(pairs + extra)[i] for i in order]


def image_request(config: DynamicConfig, seed: int, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Request i of the ddpm stream: noised images x_t (B, S, S, C) float32 and their
    timesteps t (B,) int32, seeded (q_sample of workloads.diffusion's images and noise)."""
    B, S = image_shapes(config, seed)[i]
    cfg = config.unet_at(S)
    x0, t, noise = diffusion.make_train_batch(cfg, B, seed + 200 + i)
    return diffusion.q_sample(cfg.schedule, x0, t, noise).astype(np.float32), t


@lru_cache(maxsize=1024)
def image_reference(config: DynamicConfig, seed: int, i: int) -> np.ndarray:
    """Request i's noise prediction, numpy float64, at its own batch and resolution."""
    B, S = image_shapes(config, seed)[i]
    return diffusion.reference_eps(config.unet_at(S), _unet_params(config.unet, seed), *image_request(config, seed, i))


def strategies(framework: str, mode: str, task: str) -> tuple[str | None, ...]:
    """Every strategy of a mode, for every framework: one a framework lacks is recorded
    unsupported with its reason, so the matrix shows it. prefill_int has no padding to
    bucket and no varying tensor dimension to mark or export: INT_STRATEGIES only."""
    if task == "prefill_int":
        if mode == "eager":
            return (None,)
        return (None, *(s for s in INT_STRATEGIES if mode == "compiled" or s in GRAPH_STRATEGIES))
    if mode == "eager":
        return (None, "bucketed")
    return (None, *(GRAPH_STRATEGIES if mode == "graph" else COMPILED_STRATEGIES))


def task_spec(config: DynamicConfig, batch: int, task: str, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """The stream's requests (padded to buckets for `bucketed`), the shape key of each, the
    reference output of each (numpy float64, unpadded) and the padding waste."""
    choose("dynamic task", task, TASKS)
    if task == "ddpm":
        return ddpm_spec(config, seed, strategy)
    if task == "prefill_int":
        return prefill_int_spec(config, seed)
    if task == "generate":
        return generate_spec(config, seed, strategy)
    if task == "train":
        return train_spec(config, seed, strategy)
    cfg, B = config.gpt, config.batch
    lengths = prompt_lengths(config, seed)
    padded = [bucket_of(config, T) if strategy == "bucketed" else T for T in lengths]
    inputs = tuple((np.pad(prompt(config, seed, i), ((0, 0), (0, P - T))), np.full((B,), T - 1, np.int32))
                   for i, (T, P) in enumerate(zip(lengths, padded)))
    needed, computed = B * sum(lengths), B * sum(padded)
    flops = sum(gpt.generate_flops(cfg, B, T, 1) for T in lengths)
    stream = Stream(keys=tuple(f"T={P}" for P in padded), expected=lambda i: reference(config, seed, i),
                    tolerance=TOLERANCE, record={"padding_waste": 1 - needed / computed, "stream": "gpt-prefill",
                            "requests": len(lengths)})
    return TaskSpec(task, "prefill", inputs, needed, "tokens", flops,
                    f"B={B},T={min(lengths)}..{max(lengths)},requests={len(lengths)}",
                    note="GPT prefill stream: logits of each prompt's last position", stream=stream)


def ddpm_spec(config: DynamicConfig, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """The ddpm stream: request i is eps(x_t, t) at image_shapes()[i]; `bucketed` pads the
    batch only (zero images, timestep 0) to the next power of two and compares the real rows
    (Stream.rows), since padding pixels would change every real pixel (module docstring)."""
    shapes = image_shapes(config, seed)
    buckets = config.batch_buckets()
    inputs, rows, keys = [], [], []
    for i, (B, S) in enumerate(shapes):
        x, t = image_request(config, seed, i)
        P = next(b for b in buckets if b >= B) if strategy == "bucketed" else B
        inputs.append((np.pad(x, ((0, P - B), (0, 0), (0, 0), (0, 0))), np.pad(t, (0, P - B))))
        rows.append(B)
        keys.append(f"B={P},S={S}")
    needed = sum(B * S * S for B, S in shapes)
    computed = sum(x.shape[0] * x.shape[1] * x.shape[2] for x, _ in inputs)
    flops = sum(diffusion.forward_flops(config.unet_at(S), B) for B, S in shapes)
    stream = Stream(keys=tuple(keys), expected=lambda i: image_reference(config, seed, i), tolerance=DDPM_TOLERANCE,
                    rows=tuple(rows) if strategy == "bucketed" else None,
                    record={"padding_waste": 1 - needed / computed, "stream": "ddpm-eps", "requests": len(shapes)})
    n_images = sum(B for B, _ in shapes)
    return TaskSpec("ddpm", "eps", tuple(inputs), n_images, "images", flops,
                    f"B={min(config.image_batches)}..{max(config.image_batches)},"
                    f"S={min(config.resolutions)}..{max(config.resolutions)},requests={len(shapes)}",
                    note="DDPM UNet eps(x_t, t) stream of varying batch and resolution", stream=stream)


def prefill_int_spec(config: DynamicConfig, seed: int = 0) -> TaskSpec:
    """The prefill stream's prompts, each right-padded to the block size, with the real length
    as a Python int (the harness converts numpy arrays only: the int reaches the model as it
    is). The shape key is the length: the tensor's shape never changes."""
    cfg, B = config.gpt, config.batch
    lengths = prompt_lengths(config, seed)[:config.int_requests]
    inputs = tuple((np.pad(prompt(config, seed, i), ((0, 0), (0, cfg.block_size - T))), int(T))
                   for i, T in enumerate(lengths))
    flops = sum(gpt.generate_flops(cfg, B, T, 1) for T in lengths)
    stream = Stream(keys=tuple(f"length={T}" for T in lengths), expected=lambda i: reference(config, seed, i),
                    tolerance=TOLERANCE, record={"padding_waste": 0.0, "stream": "gpt-prefill-int",
                                                 "requests": len(lengths)})
    return TaskSpec("prefill_int", "prefill_int", inputs, B * sum(lengths), "tokens", flops,
                    f"B={B},T={cfg.block_size} (length {min(lengths)}..{max(lengths)} as an int),"
                    f"requests={len(lengths)}",
                    note="GPT prefill, the length a Python int sliced inside the compiled function", stream=stream)


class ByTask(Model):
    """A dynamic case's model: each task's model is made when the harness looks up the task's
    method (getattr, after build and before any timing), so a case builds only its own model
    and a strategy its task lacks is refused (Unsupported) there. `makers`: method -> a
    function making an object that has that method."""

    def __init__(self, **makers: Callable[[], Any]) -> None:
        self._makers = makers

    def made(self, method: str) -> Any:
        """The object `method`'s look-up makes (the task's model)."""
        return self._makers[method]()

    def __getattr__(self, method: str) -> Any:
        makers = self.__dict__.get("_makers", {})
        if method not in makers:
            raise AttributeError(method)
        return getattr(makers[method](), method)


# ----------------------------------------------------------------------------- generate

def generate_lengths(config: DynamicConfig, seed: int = 0) -> list[int]:
    """The first generate_requests prompt lengths of the prefill stream, the tail clipped so
    that every prompt and its new tokens fit in the block: min(T, block_size - new_tokens)."""
    limit = config.gpt.block_size - config.new_tokens
    return [min(T, limit) for T in prompt_lengths(config, seed)[:config.generate_requests]]


def greedy_reference(cfg: gpt.GPTConfig, params: dict[str, np.ndarray], prompt: np.ndarray,
                     n_new: int) -> tuple[np.ndarray, float]:
    """Greedy decoding in numpy float64 by full recomputation (workloads.gpt.reference_logits):
    the new tokens (B, n_new), and the smallest top-2 logit margin over every step and row,
    relative to that row's logits' norm."""
    seq, margin = np.asarray(prompt), np.inf
    for _ in range(n_new):
        logits = gpt.reference_logits(cfg, params, seq)[:, -1]                  # (B, vocab)
        top2 = np.sort(logits, axis=-1)[:, -2:]
        margin = min(margin, float(np.min((top2[:, 1] - top2[:, 0]) / np.linalg.norm(logits, axis=-1))))
        seq = np.concatenate([seq, logits.argmax(-1).astype(seq.dtype)[:, None]], axis=1)
    return seq[:, prompt.shape[1]:], margin


@lru_cache(maxsize=1024)
def generate_request(config: DynamicConfig, seed: int, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Request i of the generate stream: its prompt (batch, length) int32 and the reference's
    new tokens (batch, new_tokens). Seeded tokens are redrawn (seed offset k) until the
    reference's greedy choices are all clear (GREEDY_MARGIN), so the check cannot flip on
    float32 rounding. Cached: every case of a stream compares with the same references."""
    cfg, T = config.gpt, generate_lengths(config, seed)[i]
    for k in range(32):
        tokens = gpt.make_batch(cfg, config.batch, seed + 100 + i + 10007 * k, seq_len=T)[0]
        new, margin = greedy_reference(cfg, _params(cfg, seed), tokens, config.new_tokens)
        if margin >= GREEDY_MARGIN:
            return tokens, new
    raise FwbenchError(f"generate request {i}: no prompt of 32 drawn has greedy choices clear of float32 "
                       f"rounding (top-2 margin >= {GREEDY_MARGIN:g} of the logits' norm)")


def generate_spec(config: DynamicConfig, seed: int, strategy: str | None) -> TaskSpec:
    """`generate(tokens (B, P) int32, last (B,) int32) -> (B, new_tokens)` greedy new tokens,
    P = T unpadded, or T's bucket (right-padded; the first new token comes from position
    last = T - 1 and is written at T, over the padding)."""
    cfg, B, n = config.gpt, config.batch, config.new_tokens
    lengths = generate_lengths(config, seed)
    padded = [bucket_of(config, T) if strategy == "bucketed" else T for T in lengths]
    inputs = tuple((np.pad(generate_request(config, seed, i)[0], ((0, 0), (0, P - T))), np.full((B,), T - 1, np.int32))
                   for i, (T, P) in enumerate(zip(lengths, padded)))

    def check(i: int, out: np.ndarray) -> str | None:
        ref = generate_request(config, seed, i)[1]
        if out.shape != ref.shape or not np.array_equal(out, ref):
            return f"new tokens {np.asarray(out).tolist()} differ from the float64 greedy reference {ref.tolist()}"
        return None

    stream = Stream(keys=tuple(f"T={P}" for P in padded), check=check,
                    record={"padding_waste": 1 - sum(lengths) / sum(padded), "stream": "gpt-generate",
                            "requests": len(lengths), "new_tokens": n})
    return TaskSpec("generate", "generate", inputs, B * n * len(lengths), "tokens",
                    sum(gpt.generate_flops(cfg, B, T, n) for T in lengths),
                    f"B={B},T={min(lengths)}..{max(lengths)},new={n},requests={len(lengths)}",
                    note=f"GPT generate stream: {n} greedy tokens per prompt, KV cache of block_size",
                    stream=stream)


# ----------------------------------------------------------------------------- train

def train_lengths(config: DynamicConfig, seed: int = 0) -> list[int]:
    """Sequence lengths of the training batches: the prompt-length distribution, drawn anew."""
    return prompt_lengths(config, seed + 1, config.train_requests)


def train_batch(config: DynamicConfig, seed: int, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Batch i of the train stream: tokens and next-token targets (train_batch, length) int32."""
    return gpt.make_batch(config.gpt, config.train_batch, seed + 300 + i, seq_len=train_lengths(config, seed)[i])


@lru_cache(maxsize=4)
def direction(cfg: gpt.GPTConfig, seed: int) -> dict[str, np.ndarray]:
    """A seeded random unit direction over all parameters (float64): train's gradients are
    checked by their derivative along it."""
    rng = np.random.default_rng(seed + 17)
    d = {k: rng.standard_normal(s) for k, s in gpt.param_shapes(cfg).items()}
    norm = np.sqrt(sum(float(np.sum(v * v)) for v in d.values()))
    return {k: v / norm for k, v in d.items()}


@lru_cache(maxsize=1024)
def train_reference(config: DynamicConfig, seed: int, i: int) -> tuple[float, float]:
    """Batch i's loss (numpy float64, unpadded) and the loss's derivative along `direction`
    by a 4th-order central difference, (-L(p+2hd) + 8L(p+hd) - 8L(p-hd) + L(p-2hd)) / 12h:
    independent of every framework's autodiff, as tests/support/equivalence.py's grad_fd check is."""
    cfg = config.gpt
    p0 = {k: v.astype(np.float64) for k, v in _params(cfg, seed).items()}
    d, (tokens, targets) = direction(cfg, seed), train_batch(config, seed, i)

    def f(s: float) -> float:
        return gpt.reference_loss(cfg, {k: p0[k] + s * d[k] for k in p0}, tokens, targets)

    h = FD_H
    return f(0.0), (8 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12 * h)


def train_errors(config: DynamicConfig, seed: int, i: int, out: dict[str, np.ndarray]) -> tuple[float, float]:
    """Batch i's loss relative error, and its gradients' directional-derivative error relative
    to the size of <g, d> for a random unit d (||g|| / sqrt(n)), as tests/support/equivalence.py."""
    loss, fd = train_reference(config, seed, i)
    d = direction(config.gpt, seed)
    g = {k: np.asarray(out[k], np.float64) for k in d}
    dd = sum(float(np.sum(g[k] * d[k])) for k in d)
    scale = np.sqrt(sum(float(np.sum(v * v)) for v in g.values()) / sum(v.size for v in d.values()))
    return abs(float(out["loss"]) - loss) / abs(loss), abs(dd - fd) / scale if scale > 0 else abs(dd - fd)


def train_spec(config: DynamicConfig, seed: int, strategy: str | None) -> TaskSpec:
    """`train(tokens, targets (B, P) int32, weights (B, P) float32) -> {"loss", **gradients}`:
    one loss-and-gradients computation per request (forward and backward, no optimizer step:
    the optimizer's work does not depend on the sequence length, and requests must stay
    independent so that each can be checked). The loss is the weighted mean of the token
    cross-entropies, sum(w * ce) / sum(w): weights are 1 on real tokens, 0 on a bucket's
    padding, so padded loss and gradients equal the unpadded ones. Gradients are keyed and
    laid out as workloads.gpt's parameters."""
    cfg, B = config.gpt, config.train_batch
    lengths = train_lengths(config, seed)
    padded = [bucket_of(config, T) if strategy == "bucketed" else T for T in lengths]
    inputs = tuple(tuple(np.pad(a, ((0, 0), (0, P - T))) for a in (*train_batch(config, seed, i),
                                                                     np.ones((B, T), np.float32)))
                   for i, (T, P) in enumerate(zip(lengths, padded)))

    def check(i: int, out: dict[str, np.ndarray]) -> str | None:
        loss_err, grad_err = train_errors(config, seed, i, out)
        if not loss_err <= LOSS_TOLERANCE:
            return f"loss differs from the float64 reference (relative error {loss_err:.2g} > {LOSS_TOLERANCE:g})"
        if not grad_err <= GRAD_FD_TOLERANCE:
            return (f"gradients' directional derivative differs from the float64 finite difference "
                    f"(relative error {grad_err:.2g} > {GRAD_FD_TOLERANCE:g})")
        return None

    stream = Stream(keys=tuple(f"T={P}" for P in padded), check=check,
                    record={"padding_waste": 1 - sum(lengths) / sum(padded), "stream": "gpt-train",
                            "requests": len(lengths)})
    return TaskSpec("train", "train", inputs, B * sum(lengths), "tokens",
                    sum(B * T * gpt.flops_per_token(cfg, T, training=True) for T in lengths),
                    f"B={B},T={min(lengths)}..{max(lengths)},requests={len(lengths)}",
                    note="GPT training stream: loss and gradients per batch, no optimizer step", stream=stream)


def lacks(framework: str, mode: str, strategy: str | None, compiled: tuple[str | None, ...], why: str) -> str | None:
    """Why `framework` has no `strategy` in `mode` (None when it has it): eager mode has the
    default and bucketed, the others the framework's own `compiled` list."""
    have = (None, "bucketed") if mode == "eager" else compiled
    if strategy in have:
        return None
    names = ", ".join("default" if s is None else s for s in have)
    return not_its_api(framework, f"dynamic-shape strategy {strategy!r} in {mode} mode (it has {names}): {why}")


@dataclass(frozen=True)
class Models:
    """One framework's dynamic-shape models (frameworks/<fw>/dynamic.py: MODELS): each class
    is made as cls(adapter, config, params, case) with the GPT's or the UNet's parameters;
    `strategies` are the strategies it has in graph and compiled modes (and `why` says what
    the others are), `int_strategies`/`int_why` the same for prefill_int."""
    framework: str
    prefill: Callable[..., Any]          # prefill, generate and train: one GPT model
    ddpm: Callable[..., Any]
    prefill_int: Callable[..., Any]
    strategies: tuple[str | None, ...]
    why: str
    int_strategies: tuple[str | None, ...]
    int_why: str


def build(models: Models, adapter: Any, config: DynamicConfig, params: dict[str, np.ndarray], case: Any) -> ByTask:
    """A framework's dynamic case (every frameworks/<fw>/dynamic.py's build): the task's model,
    made when the harness looks up its method, after refusing a strategy the framework does
    not have in the case's mode (Unsupported, with the reason)."""
    gpt_params, unet_params = split_params(params)

    def made(cls: Callable[..., Any], p: dict[str, np.ndarray], have: tuple[str | None, ...],
             why: str) -> Callable[[], Any]:
        def make() -> Any:
            reason = lacks(models.framework, case.mode, case.strategy, have, why)
            if reason:
                raise Unsupported(reason)
            return cls(adapter, config, p, case)
        return make

    gpt_model = made(models.prefill, gpt_params, models.strategies, models.why)
    return ByTask(prefill=gpt_model, generate=gpt_model, train=gpt_model,
                  eps=made(models.ddpm, unet_params, models.strategies, models.why),
                  prefill_int=made(models.prefill_int, gpt_params, models.int_strategies, models.int_why))


@runtime_checkable
class PrefillModel(Protocol):
    """What every framework builds (frameworks/<fw>/dynamic.py: build(adapter, config, params,
    case), through workloads.dynamic.build); arrays are the framework's own."""

    def prefill(self, tokens: Any, last: Any) -> Any:
        """(B, T) int32 tokens, (B,) int32 last real positions -> (B, vocab) float32 logits."""

    def generate(self, tokens: Any, last: Any) -> Any:
        """(B, P) int32 prompts, (B,) int32 last real positions (the same in every row) ->
        (B, new_tokens) greedy new tokens, the first from position last, written at last + 1."""

    def train(self, tokens: Any, targets: Any, weights: Any) -> dict[str, Any]:
        """(B, P) tokens, targets, float32 weights -> {"loss": sum(w ce) / sum(w), **gradients}."""


# What every framework's build returns: the GPT model a prefill, generate or train request's
# look-up makes (ByTask.made); tests/test_conformance.py checks each against it.
MODEL = PrefillModel
