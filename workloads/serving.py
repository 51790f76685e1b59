"""Serving, framework-free: each framework's deployable inference artefact, loaded by a process
that never imports the model code, timed against the framework's development path (claim 6 of
the claims fwbench tests: "PyTorch is excellent for development, but production inference is
best run in a different framework or engine"). docs/design/serving.md has the reasoning.

Tasks are the two models' requests, each served by a loop that is the same for every path
(frameworks/serve.py: LOOPS), so every path does the same work and only the engine differs:

    generate  GPT: a prompt of T tokens -> n_new greedy tokens: the prefill (tokens -> next
              token, its logits, each layer's key/value caches padded to block_size) then
              n_new - 1 KV-cached decode steps (token, position, caches -> the same); each new
              token is read back to the host as it comes (a service streams it)
    sample    DDPM: x_T -> x_0 by DDIM (eta 0) over `steps` denoising steps
              x <- a x + b eps(x, t), the step a function of (x, t, a, b)

A path is a (mode, strategy) of the case (PATHS): the development path is the framework's own
mode with no strategy (eager, torch.compile, jax.jit, tf.function, tf.function with XLA),
served by a process that builds the model from its weights; an artefact path (strategy) is
exported in the benchmark process and served from its file(s) alone: torch.export +
AOTInductor, jax.export (serialised StableHLO), jax2tf to a SavedModel, TensorFlow's SavedModel
(graph, and its jit_compile functions under XLA), and ONNX run by ONNX Runtime, the other
engine. Sequence length and batch are exported as dynamic dimensions where the exporter
allows; an exporter's refusal is the case's record (unsupported, in the exporter's words).

What is measured (frameworks/harness/serving.py): the check of the served outputs against the
framework's eager model on the same weights and inputs (before anything is timed; a
different artefact is `failed`), the cold start (process start to the first answer, with
imports, load and first request apart), single-stream latency at batch 1 over a stream of
prompt lengths (p50/p90/p99), offline throughput over the preset's batches (the best, and
at which batch), and the serving process's memory.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from workloads import diffusion as D
from workloads import gpt as G
from workloads.base import (
    FwbenchError,
    Preset,
    Serve,
    TaskSpec,
    check_positive,
    choose,
    fixed_tasks,
    no_device_strategies,
    rel_err,
)

NAME = "serving"
# Its strategies (the development path and each artefact exported from it) are what it
# compares, not optional variants: every `--variants` setting runs them all.
OPTIONAL_VARIANTS = False
device_strategies = no_device_strategies
TASKS = ("generate", "sample")
tasks = fixed_tasks(TASKS)
MODEL_OF = {"generate": "gpt", "sample": "diffusion"}   # the workload whose model a task serves

DEVELOPMENT, ARTEFACT, OTHER_ENGINE = "development", "artefact", "other engine"
KINDS = (DEVELOPMENT, ARTEFACT, OTHER_ENGINE)
EXTRA = "pip install 'fwbench[serving]'"     # the optional extra with onnx, onnxruntime and the converters


@dataclass(frozen=True)
class ServingPath:
    """One way a framework's model is served: a (mode, strategy) of its cases."""
    framework: str
    mode: str
    strategy: str | None
    kind: str                  # DEVELOPMENT, ARTEFACT or OTHER_ENGINE
    engine: str                # what runs it in the serving process
    made_by: str               # how it is made, in words
    needs: tuple[str, ...] = ()   # modules it needs beyond the framework (the `serving` extra and others)


# Every path, by framework, in the report's order. ONNX is the other engine: ONNX Runtime runs
# an ONNX file exported from the framework's model (JAX's through jax2tf then tf2onnx).
PATHS: tuple[ServingPath, ...] = (
    ServingPath("torch", "eager", None, DEVELOPMENT, "torch", "the eager modules"),
    ServingPath("torch", "compiled", None, DEVELOPMENT, "torch", "torch.compile (Inductor)"),
    ServingPath("torch", "compiled", "aoti", ARTEFACT, "torch AOTInductor",
                "torch.export + AOTInductor package (.pt2)"),
    ServingPath("torch", "compiled", "onnx", OTHER_ENGINE, "onnxruntime", "torch.onnx.export(dynamo=True)",
                ("onnx", "onnxscript", "onnxruntime")),
    ServingPath("jax", "eager", None, DEVELOPMENT, "jax", "the functions, op by op"),
    ServingPath("jax", "compiled", None, DEVELOPMENT, "jax", "jax.jit"),
    ServingPath("jax", "compiled", "jax-export", ARTEFACT, "jax (XLA)", "jax.export, serialised StableHLO"),
    ServingPath("jax", "compiled", "jax2tf", ARTEFACT, "tensorflow", "jax2tf to a SavedModel", ("tensorflow",)),
    ServingPath("jax", "compiled", "onnx", OTHER_ENGINE, "onnxruntime", "jax2tf, then tf2onnx",
                ("tensorflow", "tf2onnx", "onnx", "onnxruntime")),
    ServingPath("tensorflow", "eager", None, DEVELOPMENT, "tensorflow", "the eager modules"),
    ServingPath("tensorflow", "graph", None, DEVELOPMENT, "tensorflow", "tf.function"),
    ServingPath("tensorflow", "compiled", None, DEVELOPMENT, "tensorflow (XLA)", "tf.function(jit_compile=True)"),
    ServingPath("tensorflow", "graph", "saved-model", ARTEFACT, "tensorflow", "tf.saved_model of the tf.functions"),
    ServingPath("tensorflow", "compiled", "saved-model", ARTEFACT, "tensorflow (XLA)",
                "tf.saved_model of the jit_compile tf.functions"),
    ServingPath("tensorflow", "graph", "onnx", OTHER_ENGINE, "onnxruntime", "tf2onnx from the tf.function",
                ("tf2onnx", "onnx", "onnxruntime")),
)


def path_of(framework: str, mode: str, strategy: str | None) -> ServingPath | None:
    """The path of a case, or None where the framework has none at that mode and strategy."""
    return next((p for p in PATHS if (p.framework, p.mode, p.strategy) == (framework, mode, strategy)), None)


def strategies(framework: str, mode: str, task: str) -> tuple[str | None, ...]:
    """The case variants: the development path (None) first, then the artefacts exported from
    this mode (PATHS)."""
    return (None, *(p.strategy for p in PATHS if p.framework == framework and p.mode == mode and p.strategy))


def missing(path: ServingPath) -> str | None:
    """One line naming what the path needs and lacks, with the command that installs it; None
    when everything it needs is importable (found, not imported)."""
    lack = [m for m in path.needs if importlib.util.find_spec(m) is None]
    if not lack:
        return None
    how = "pip install 'fwbench[tensorflow]'" if lack == ["tensorflow"] else EXTRA
    return f"{path.made_by} needs {', '.join(lack)}, which {'is' if len(lack) == 1 else 'are'} not installed: {how}"


# ----------------------------------------------------------------------------- config

@dataclass(frozen=True)
class ServingConfig:
    """The models served (the gpt and diffusion workloads' presets), the latency stream and the
    offline batches."""
    gpt_preset: str = "small"
    diffusion_preset: str = "small"
    requests: int = 16                   # requests of the latency stream (batch 1)
    n_new: int = 8                       # tokens a generate request produces
    min_prompt: int = 4                  # shortest prompt of the stream
    steps: int = D.SAMPLE_STEPS          # DDIM steps of a sample request
    batches: tuple[int, ...] = (1, 2, 4, 8, 16)    # the offline throughput sweep
    # fewest timed latency requests (whole passes over the stream): a p99 of fewer than about
    # 100 requests is the largest of them
    min_requests: int = 100

    def __post_init__(self) -> None:
        check_positive(self, "requests", "n_new", "min_prompt", "steps")
        G.preset(self.gpt_preset)
        D.preset(self.diffusion_preset)
        if not self.batches or any(not isinstance(b, int) or b < 1 for b in self.batches):
            raise FwbenchError(f"ServingConfig.batches must be positive integers, got {self.batches!r}")
        if self.min_prompt + self.n_new > self.gpt.block_size:
            raise FwbenchError(f"ServingConfig: min_prompt {self.min_prompt} + n_new {self.n_new} must fit in "
                               f"block_size {self.gpt.block_size}")

    @property
    def gpt(self) -> G.GPTConfig:
        return G.preset(self.gpt_preset).config

    @property
    def diffusion(self) -> D.DiffusionConfig:
        return D.preset(self.diffusion_preset).config

    @property
    def longest(self) -> int:
        """The longest prompt: what fits in the block with n_new tokens after it."""
        return self.gpt.block_size - self.n_new


PRESETS: dict[str, Preset] = {
    "tiny": Preset("tiny", ServingConfig("tiny", "tiny", requests=8, n_new=4, min_prompt=2, steps=3, batches=(1, 2, 4),
                                         min_requests=0), batch=1, note="for tests"),
    "small": Preset("small", ServingConfig(), batch=1, note="CPU benchmark default: the gpt and diffusion small "
                                                            "models, 16 requests, batches 1-16"),
}


def preset(name: str) -> Preset:
    return PRESETS[choose("serving preset", name, PRESETS)]


def init_params(config: ServingConfig, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Each model's parameters, by the workload whose model it is (MODEL_OF)."""
    return {"gpt": G.init_params(config.gpt, seed), "diffusion": D.init_params(config.diffusion, seed)}


# ----------------------------------------------------------------------------- requests

def prompt_lengths(config: ServingConfig, seed: int = 0) -> list[int]:
    """The latency stream's prompt lengths: seeded, uniform over min_prompt..longest."""
    rng = np.random.default_rng([seed, 44])
    return [int(v) for v in rng.integers(config.min_prompt, config.longest + 1, config.requests)]


def prompt(config: ServingConfig, batch: int, length: int, seed: int) -> np.ndarray:
    """A (batch, length) int32 prompt of seeded token ids."""
    return G.make_batch(config.gpt, batch, seed, seq_len=length)[0]


def sampler(config: ServingConfig) -> dict[str, np.ndarray]:
    """DDIM's per-step timesteps and coefficients (workloads.diffusion.sampler_coefficients),
    as the serving processes take them: t int32, a and b float32, each (steps,)."""
    c = D.sampler_coefficients(config.diffusion.schedule, "ddim", config.steps)
    return {"t": c["t"].astype(np.int32), "a": c["a"].astype(np.float32), "b": c["b"].astype(np.float32)}


# rel_err allowed between a served output and the framework's eager model on the same weights
# and inputs: about ten times the largest measured, 1.4e-6 (TensorFlow's graph-mode generate at
# small; python -m tests.measure.measure_serving; docs/design/serving.md, "Equivalence").
TOL = {"generate": 1.5e-5, "sample": 1.5e-5}


def check_inputs(config: ServingConfig, method: str, /, *args: Any, **kwargs: Any) -> None:
    """A serving case takes no inputs of the harness's (its requests are made and checked in
    the serving process: `serve`); any method other than `serve` is one line."""
    if method != "serve" or args or kwargs:
        raise FwbenchError(f"the serving workload's cases have one method, serve(), with no inputs; got {method!r}")


def task_spec(config: ServingConfig, batch: int, task: str, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """The requests of a serving case (the same for every path): the latency stream at batch
    1, the requests checked before timing (batch 1, and batch 2 at another size: the dynamic
    batch), and one request per offline batch. items = tokens or images of a request."""
    choose("serving task", task, TASKS)
    if task == "generate":
        g, n = config.gpt, config.n_new
        lengths = prompt_lengths(config, seed)
        t0 = G.generate_lengths(g)[0]
        stream = tuple((prompt(config, 1, T, seed + i),) for i, T in enumerate(lengths))
        serve = Serve("generate", stream, tuple(f"T={T}" for T in lengths),
                      check=((prompt(config, 1, lengths[0], seed + 100),),
                             (prompt(config, 2, config.longest, seed + 101),)),
                      batches=tuple((b, (prompt(config, b, t0, seed + 200 + b),)) for b in config.batches),
                      items=lambda req: int(req[0].shape[0]) * n,
                      settings={"n_new": n, "block_size": g.block_size}, tolerance=TOL[task],
                      min_requests=config.min_requests)
        flops = float(np.mean([G.generate_flops(g, 1, T, n) for T in lengths]))
        return TaskSpec(task, "serve", (), n, "tokens", flops, f"B=1,prompt={min(lengths)}-{max(lengths)},new={n}",
                        serve=serve, note="greedy; prefill then KV-cached decode steps, each token read back",
                        sizes={"n_new": n, "stream_requests": len(lengths)})
    d = config.diffusion
    stream = tuple((D.make_noise(d, (1,), seed + i),) for i in range(config.requests))
    serve = Serve("sample", stream, tuple(f"B=1,{d.image_size}x{d.image_size}" for _ in stream),
                  check=((D.make_noise(d, (1,), seed + 100),), (D.make_noise(d, (2,), seed + 101),)),
                  batches=tuple((b, (D.make_noise(d, (b,), seed + 200 + b),)) for b in config.batches),
                  items=lambda req: int(req[0].shape[0]), settings=sampler(config), tolerance=TOL[task],
                  min_requests=config.min_requests)
    return TaskSpec(task, "serve", (), 1, "images", config.steps * D.forward_flops(d, 1),
                    f"B=1,{d.image_size}x{d.image_size},steps={config.steps}", serve=serve,
                    note="DDIM eta=0; the step a x + b eps(x, t) served, the loop the serving process's",
                    sizes={"steps": config.steps, "stream_requests": len(stream)})


def differs(task: str, got: Any, want: Any, tolerance: float) -> str | None:
    """What differs between a served output and the eager model's (None when they agree):
    generate compares the tokens exactly and every step's logits by rel_err; sample x_0."""
    if task == "generate":
        (tokens, logits), (want_tokens, want_logits) = got, want
        if np.shape(tokens) != np.shape(want_tokens):
            return f"tokens of shape {np.shape(tokens)}, eager {np.shape(want_tokens)}"
        err = rel_err(logits, want_logits)
        if not np.array_equal(tokens, want_tokens):
            first = int(np.argwhere(np.asarray(tokens) != np.asarray(want_tokens))[0][1])
            return f"greedy tokens differ from eager's from new token {first} on (logits rel. error {err:.2g})"
        return None if err <= tolerance else f"logits differ from eager's (relative error {err:.2g} > {tolerance:g})"
    if np.shape(got) != np.shape(want):
        return f"output of shape {np.shape(got)}, eager {np.shape(want)}"
    err = rel_err(got, want)
    return None if err <= tolerance else f"x_0 differs from eager's (relative error {err:.2g} > {tolerance:g})"


def check_error(task: str, got: Any, want: Any) -> float:
    """The relative error a check measured (logits for generate, x_0 for sample)."""
    return rel_err(got[1], want[1]) if task == "generate" else rel_err(got, want)


# ----------------------------------------------------------------------------- interface

@runtime_checkable
class Servable(Protocol):
    """What frameworks/<fw>/serving.py's build(adapter, config, params, case) returns; nothing
    is exported or compiled until export() (building every declared case is cheap).

    path: the case's ServingPath.
    export(folder) -> (job, record keys): writes what the serving process loads into folder
        (the artefact; the development path's weights) and returns the serving process's job
        (frameworks/serve.py: its engine and files) and record keys (exporter, export_s,
        artefact_bytes, dynamic_dims); an exporter's refusal raises Unsupported with its message.
    expected(serve) -> the eager model's output of every check request (the reference the
        served outputs must match, computed in this process by the same request loop).
    """
    path: ServingPath

    def export(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        ...

    def expected(self, serve: Serve) -> list[Any]:
        ...


# What every framework's build returns: tests/test_conformance.py checks each against it.
MODEL = Servable
