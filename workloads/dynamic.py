"""Dynamic shapes, framework-free: seeded streams of requests whose shapes vary, the
strategies each framework has for them, and the references their outputs must match.

A case is (stream, strategy) under one framework and mode. Its timing policy is the cold
stream (docs/ARCHITECTURE.md, "Dynamic shapes"): on a fresh model every request is timed
alone in arrival order, with the compilation counter read after each, so the first
request of a new shape can be told from a seen one; then whole warm passes (every shape
seen) are timed as rounds. The harness does this for any TaskSpec with a `stream`
(workloads.base.Stream; frameworks/bench.py: time_stream).

Streams (this module):
    prefill     GPT serving: `requests` prompts (batch 1 each) whose lengths follow a seeded,
                skewed distribution over min_len..block_size with many distinct values; the
                task is the logits of each prompt's last position.
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
    every mode     bucketed       framework-neutral: each prompt right-padded to the next
                                  power of two (bucket), the real last position passed as an
                                  index, so only the bucket count compiles; causal attention
                                  keeps the padding out of every real position. For ddpm only
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

Every request of prefill is `prefill(tokens (B, T) int32, last (B,) int32) -> (B, vocab)
float32`: the logits at position last[b] of row b (T - 1 unless padded); of prefill_int,
`prefill_int(tokens (B, block) int32, length: int) -> (B, vocab)`, the logits at length - 1;
of ddpm, `eps(x (B, S, S, C) float32, t (B,) int32) -> (B, S, S, C)` (workloads.diffusion's
denoiser; attention blocks where the parameter set has them, i.e. at the same UNet levels
at every resolution).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Protocol

import numpy as np

from workloads import diffusion, gpt
from workloads.base import FwbenchError, Preset, Stream, TaskSpec, check_positive, choose, replace_config

NAME = "dynamic"
TASKS = ("prefill", "ddpm", "prefill_int")
# The ddpm stream's outputs against the float64 reference: the diffusion forward tolerance of
# the equivalence tests (tests/equivalence.py: TOL[("forward", "diffusion")]).
DDPM_TOLERANCE = 8e-5
# prefill_int: the length is a Python int, so only these strategies mean something.
INT_STRATEGIES = ("static", "dynamic", "input_signature", "reduce_retracing")
UNET_PREFIX = "unet/"   # init_params: the ddpm stream's UNet parameters, beside the GPT's
# Outputs on the real positions must equal the unpadded eager result within the GPT forward
# tolerance of the equivalence tests (tests/equivalence.py: TOL[("forward", "gpt")]).
TOLERANCE = 3e-5
COMPILED_STRATEGIES = ("static", "dynamic", "mark_dynamic", "export", "input_signature", "reduce_retracing",
                       "bucketed")
GRAPH_STRATEGIES = ("input_signature", "reduce_retracing", "bucketed")


@dataclass(frozen=True)
class DynamicConfig:
    gpt_preset: str = "small"   # the model every request runs (workloads.gpt presets)
    requests: int = 64          # requests per stream
    min_len: int = 8            # shortest prompt
    batch: int = 1              # prompts per request
    # the ddpm stream
    diffusion_preset: str = "tiny"                          # the UNet (workloads.diffusion presets)
    # Sized for the CPU budget: torch.compile takes about 30 s per UNet graph here (under
    # load), so 9 (batch, resolution) pairs, 6 bucketed (batch buckets 1 and 4).
    resolutions: tuple[int, ...] = (16, 32, 48)             # image sizes, square
    image_batches: tuple[int, ...] = (1, 3, 4)              # images per request
    image_requests: int = 18                                # requests of the ddpm stream

    def __post_init__(self) -> None:
        check_positive(self, "requests", "min_len", "batch", "image_requests")
        gpt.preset(self.gpt_preset)
        if self.min_len > self.gpt.block_size:
            raise FwbenchError(f"min_len {self.min_len} exceeds the block size {self.gpt.block_size}")
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

    def buckets(self) -> tuple[int, ...]:
        """Powers of two from the first one >= min_len, the last one the block size."""
        b, out = 1, []
        while b < self.gpt.block_size:
            if b >= self.min_len:
                out.append(b)
            b *= 2
        return (*out, self.gpt.block_size)


PRESETS: dict[str, Preset] = {
    "tiny": Preset("tiny", DynamicConfig(gpt_preset="tiny", requests=12, resolutions=(8, 12), image_batches=(1, 3),
                                         image_requests=6), batch=1, note="for tests"),
    "small": Preset("small", DynamicConfig(gpt_preset="small", requests=64), batch=1,
                    note="CPU preset: 64 requests, prompts of 8..128 tokens; ddpm: 18 requests of 1, 3 or 4 "
                         "images at 16, 32 or 48 pixels (the tiny UNet)"),
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


def prompt_lengths(config: DynamicConfig, seed: int = 0) -> list[int]:
    """Seeded prompt lengths in arrival order, skewed towards short prompts as chat and
    completion traffic is (a Beta(1.5, 4) over min_len..block_size: median near a quarter of
    the range, a long tail up to the block size), so most lengths are distinct."""
    lo, hi = config.min_len, config.gpt.block_size
    u = np.random.default_rng(seed + 7).beta(1.5, 4.0, config.requests)
    return [int(lo + np.floor(x * (hi - lo + 1))) for x in np.minimum(u, 1 - 1e-9)]


def bucket_of(config: DynamicConfig, length: int) -> int:
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
    lengths = prompt_lengths(config, seed)
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


class ByTask:
    """A dynamic case's model: each task's model is made when the harness looks up the task's
    method (getattr, after build and before any timing), so a case builds only its own model
    and a strategy its task lacks is refused (Unsupported) there. `makers`: method -> a
    function making an object that has that method."""

    def __init__(self, **makers: Callable[[], Any]) -> None:
        self._makers = makers

    def __getattr__(self, method: str) -> Any:
        makers = self.__dict__.get("_makers", {})
        if method not in makers:
            raise AttributeError(method)
        return getattr(makers[method](), method)


def lacks(framework: str, mode: str, strategy: str | None, compiled: tuple[str | None, ...], why: str) -> str | None:
    """Why `framework` has no `strategy` in `mode` (None when it has it): eager mode has the
    default and bucketed, the others the framework's own `compiled` list."""
    have = (None, "bucketed") if mode == "eager" else compiled
    if strategy in have:
        return None
    names = ", ".join("default" if s is None else s for s in have)
    return f"{framework} has no dynamic-shape strategy {strategy!r} in {mode} mode (it has {names}): {why}"


class PrefillModel(Protocol):
    """What every framework builds (frameworks/<fw>/dynamic.py: build(adapter, config, params,
    mode, device, strategy)); arrays are the framework's own."""

    def prefill(self, tokens: Any, last: Any) -> Any:
        """(B, T) int32 tokens, (B,) int32 last real positions -> (B, vocab) float32 logits."""
