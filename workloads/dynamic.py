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

Strategies (records' `strategy`; None is each framework and mode's default):
    eager          None           op by op, each request at its own length
    torch compiled None           torch.compile(dynamic=None): automatic dynamic (the default:
                                  static first, then a dynamic graph after a shape changes)
                   static         torch.compile(dynamic=False): a graph per length, up to
                                  torch._dynamo.config.recompile_limit, then eager (a warning)
                   dynamic        torch.compile(dynamic=True): symbolic lengths from the start
                   mark_dynamic   torch._dynamo.mark_dynamic on the length dimension
    jax compiled   None           jax.jit: a trace and an XLA compile per distinct shape
                   export         jax.export with a symbolic length: one trace, then (measured)
                                  what each concrete shape costs
    tf graph / compiled (tf.function without / with jit_compile)
                   None           tf.function: a trace per new shape
                   input_signature  a TensorSpec with None dims: one trace (XLA may still
                                  compile per concrete shape: measured)
                   reduce_retracing  tf.function(reduce_retracing=True)
    every mode     bucketed       framework-neutral: each prompt right-padded to the next
                                  power of two (bucket), the real last position passed as an
                                  index, so only the bucket count compiles; causal attention
                                  keeps the padding out of every real position
A framework without one of these strategies records it `unsupported` with the reason.

Every request is `prefill(tokens (B, T) int32, last (B,) int32) -> (B, vocab) float32`: the
logits at position last[b] of row b (T - 1 unless padded).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from workloads import gpt
from workloads.base import FwbenchError, Preset, Stream, TaskSpec, check_positive, choose

NAME = "dynamic"
TASKS = ("prefill",)
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

    def __post_init__(self) -> None:
        check_positive(self, "requests", "min_len", "batch")
        gpt.preset(self.gpt_preset)
        if self.min_len > self.gpt.block_size:
            raise FwbenchError(f"min_len {self.min_len} exceeds the block size {self.gpt.block_size}")

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
    "tiny": Preset("tiny", DynamicConfig(gpt_preset="tiny", requests=12), batch=1, note="for tests"),
    "small": Preset("small", DynamicConfig(gpt_preset="small", requests=64), batch=1,
                    note="CPU preset: 64 requests, prompts of 8..128 tokens"),
}


def preset(name: str) -> Preset:
    return PRESETS[choose("dynamic preset", name, PRESETS)]


def init_params(config: DynamicConfig, seed: int = 0) -> dict[str, np.ndarray]:
    return gpt.init_params(config.gpt, seed)


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


def strategies(framework: str, mode: str, task: str) -> tuple[str | None, ...]:
    """Every strategy of a mode, for every framework: one a framework lacks is recorded
    unsupported with its reason, so the matrix shows it."""
    if mode == "eager":
        return (None, "bucketed")
    return (None, *(GRAPH_STRATEGIES if mode == "graph" else COMPILED_STRATEGIES))


def task_spec(config: DynamicConfig, batch: int, task: str, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """The stream's requests (padded to buckets for `bucketed`), the shape key of each, the
    reference output of each (numpy float64, unpadded) and the padding waste."""
    choose("dynamic task", task, TASKS)
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
