"""GPT (GPT-2 architecture), framework-free: config, presets, parameters, data, FLOPs,
the interface every framework implements, and a numpy float64 reference forward pass.

The architecture is GPT-2's exactly (Radford et al. 2019; nanoGPT's model.py):
pre-LayerNorm blocks (eps 1e-5), learned position embeddings, causal self-attention,
GELU with the tanh approximation, a final LayerNorm, the output head tied to the token
embedding, and biases on every linear layer and LayerNorm.

Parameters are a flat dict of float32 numpy arrays named and shaped as in the GPT-2
checkpoint (Hugging Face `GPT2Model` state dict), so real GPT-2 weights load by name.
Linear weights use GPT-2's Conv1D layout, (in_features, out_features): y = x @ W + b.

    wte.weight               (vocab_size, n_embd)      token embedding, tied output head
    wpe.weight               (block_size, n_embd)      learned position embedding
    h.{i}.ln_1.weight/bias   (n_embd,)
    h.{i}.attn.c_attn.weight (n_embd, 3*n_embd)        q, k, v in that order
    h.{i}.attn.c_attn.bias   (3*n_embd,)
    h.{i}.attn.c_proj.weight (n_embd, n_embd)          residual projection
    h.{i}.attn.c_proj.bias   (n_embd,)
    h.{i}.ln_2.weight/bias   (n_embd,)
    h.{i}.mlp.c_fc.weight    (n_embd, 4*n_embd)
    h.{i}.mlp.c_fc.bias      (4*n_embd,)
    h.{i}.mlp.c_proj.weight  (4*n_embd, n_embd)        residual projection
    h.{i}.mlp.c_proj.bias    (n_embd,)
    ln_f.weight/bias         (n_embd,)
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, runtime_checkable

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

NAME = "gpt"
TASKS = ("forward", "train_step", "generate")
tasks = fixed_tasks(TASKS)
# Its strategies after the first are optional variants (torch's train-step recipes, CUDA graphs):
# `--variants default` (fwbench run's default with sets) leaves them out.
OPTIONAL_VARIANTS = True
LN_EPS = 1e-5
TOKEN_DTYPES = ("int32", "int64")   # HF tokenizers and torch.long give int64
# nanoGPT's train.py: learning_rate 6e-4 (held fixed here: no warm-up or decay, so
# every step does the same work), betas (0.9, 0.95), weight decay 0.1, grad_clip 1.0.
OPTIMIZER = AdamW(lr=6e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip_norm=1.0)


@dataclass(frozen=True)
class GPTConfig:
    """nanoGPT's GPTConfig, frozen. Variants: `dataclasses.replace(cfg, n_layer=2)`."""
    block_size: int = 1024
    vocab_size: int = 50257
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True

    def __post_init__(self) -> None:
        check_positive(self, "block_size", "vocab_size", "n_layer", "n_head", "n_embd")
        if self.n_embd % self.n_head:
            raise FwbenchError(
                f"GPTConfig.n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.dropout != 0.0:
            raise FwbenchError("GPTConfig.dropout must be 0.0: fwbench compares deterministic math")
        if self.bias is not True:
            raise FwbenchError("GPTConfig.bias must be True: GPT-2 has biases on linears and LayerNorms")

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head

    def check_tokens(self, tokens: Any, what: str = "tokens", values: bool = True) -> None:
        """Refuse token ids (numpy or any framework's array) the model cannot take, with the
        reason, one message per rule: shape (batch, time), batch >= 1 (a batch of 0 is refused
        in every framework: JAX's decoding divided by it, torch's and TF's indexed past it),
        dtype int32 or int64, length 1..block_size, ids in [0, vocab_size). The ids are read from a host copy of the
        array (B*T ints; see docs/ARCHITECTURE.md, "Input rules"); values=False leaves them
        unread (the derivatives' calls, where a host copy before the call costs up to a tenth
        of it: workloads.derivatives.check_gpt_batch)."""
        shape = shape_of(tokens)
        if len(shape) != 2:
            raise FwbenchError(f"{what} must be (batch, time), got shape {shape}")
        if shape[0] < 1:
            raise FwbenchError(f"{what} must hold at least one sequence (batch >= 1), got shape {shape}")
        dt = dtype_name(tokens)
        if dt not in TOKEN_DTYPES:
            raise FwbenchError(f"{what} must be int32 or int64 token ids, got {dt}")
        if shape[1] > self.block_size:
            raise FwbenchError(f"sequence length {shape[1]} exceeds block_size {self.block_size}")
        if shape[1] < 1:
            raise FwbenchError(f"{what} must hold at least one token per row, got shape {shape}")
        if not values:
            return
        ids = host_values(tokens)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise FwbenchError(f"{what} ids must lie in [0, {self.vocab_size}), got {ids.min()}..{ids.max()}")

    def check_batch(self, tokens: Any, targets: Any, values: bool = True) -> None:
        """The inputs of loss, grads and train_step: tokens and next-token targets."""
        self.check_tokens(tokens, values=values)
        self.check_tokens(targets, "targets", values=values)
        if shape_of(targets) != shape_of(tokens):
            raise FwbenchError(f"targets must have the tokens' shape {shape_of(tokens)}, got {shape_of(targets)}")

    def check_generate(self, prompt: Any, n_new: Any) -> None:
        """The inputs of generate: a prompt, and n_new >= 0 tokens that fit in the block."""
        self.check_tokens(prompt, "prompt")
        self.check_n_new(shape_of(prompt)[1], n_new)

    def check_n_new(self, T0: int, n_new: Any) -> None:
        """generate's own check (a Python int; JAX's decoding would clamp past the block):
        n_new >= 0 tokens after a prompt of T0 that fit in the block."""
        if not isinstance(n_new, (int, np.integer)) or isinstance(n_new, bool) or n_new < 0:
            raise FwbenchError(f"n_new must be a non-negative integer, got {n_new!r}")
        if T0 + n_new > self.block_size:
            raise FwbenchError(f"prompt length {T0} + n_new {n_new} must be at most block_size {self.block_size}")


# Each method's input rule (workloads.base.check_inputs): where inputs are made, never in a call.
INPUT_RULES: dict[str, Any] = {
    "logits": lambda cfg, tokens: cfg.check_tokens(tokens),
    "loss": lambda cfg, tokens, targets: cfg.check_batch(tokens, targets),
    "grads": lambda cfg, tokens, targets: cfg.check_batch(tokens, targets),
    "train_step": lambda cfg, tokens, targets: cfg.check_batch(tokens, targets),
    "generate": lambda cfg, prompt, n_new, use_cache=True: cfg.check_generate(prompt, n_new),
}


def check_inputs(cfg: GPTConfig, method: str, /, *args: Any, **kwargs: Any) -> None:
    """The GPT's input rules for `method`'s arguments (numpy or framework arrays), one line."""
    _check_inputs(INPUT_RULES, cfg, method, args, kwargs)


PRESETS: dict[str, Preset] = {
    "tiny": Preset("tiny", GPTConfig(block_size=32, vocab_size=256, n_layer=2, n_head=4, n_embd=64),
                   batch=2, note="for tests"),
    "small": Preset("small", GPTConfig(block_size=128, vocab_size=4096, n_layer=4, n_head=4, n_embd=256),
                    batch=8, note="CPU benchmark default"),
    "gpt2": Preset("gpt2", GPTConfig(), batch=12, note="GPT-2 124M, for GPUs"),
    # GPT-2 124M's layers at a CPU's batch (the peers' check at GPT-2's shapes: docs/measurements/peers-cpu-2core)
    "gpt2-cpu": Preset("gpt2-cpu", GPTConfig(block_size=256), batch=2,
                       note="GPT-2 124M's layers (12 x 768, 50257 tokens), 256 tokens, batch 2: CPU checks"),
}


def preset(name: str) -> Preset:
    return PRESETS[choose("GPT preset", name, PRESETS)]


# ----------------------------------------------------------------------------- params

def param_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in the GPT-2 checkpoint's order."""
    d, shapes = cfg.n_embd, {}
    shapes["wte.weight"] = (cfg.vocab_size, d)
    shapes["wpe.weight"] = (cfg.block_size, d)
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        shapes[p + "ln_1.weight"] = (d,)
        shapes[p + "ln_1.bias"] = (d,)
        shapes[p + "attn.c_attn.weight"] = (d, 3 * d)
        shapes[p + "attn.c_attn.bias"] = (3 * d,)
        shapes[p + "attn.c_proj.weight"] = (d, d)
        shapes[p + "attn.c_proj.bias"] = (d,)
        shapes[p + "ln_2.weight"] = (d,)
        shapes[p + "ln_2.bias"] = (d,)
        shapes[p + "mlp.c_fc.weight"] = (d, 4 * d)
        shapes[p + "mlp.c_fc.bias"] = (4 * d,)
        shapes[p + "mlp.c_proj.weight"] = (4 * d, d)
        shapes[p + "mlp.c_proj.bias"] = (d,)
    shapes["ln_f.weight"] = (d,)
    shapes["ln_f.bias"] = (d,)
    return shapes


def decayed(name: str, shape: tuple[int, ...]) -> bool:
    """nanoGPT's rule: weight decay on every parameter of 2 or more dimensions
    (linear weights and embeddings), none on biases and LayerNorm weights."""
    return len(shape) >= 2


def init_params(cfg: GPTConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """GPT-2's initialisation (nanoGPT `_init_weights`): weights and embeddings
    N(0, 0.02); residual projections N(0, 0.02/sqrt(2 n_layer)); biases 0; LayerNorm
    weight 1, bias 0. float32."""
    rng = np.random.default_rng(seed)
    resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
    out = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith("c_proj.weight"):
            arr = rng.normal(0.0, resid_std, shape)
        elif name.endswith((".bias",)):
            arr = np.zeros(shape)
        elif ".ln_" in name or name.startswith("ln_f"):
            arr = np.ones(shape)
        else:
            arr = rng.normal(0.0, 0.02, shape)
        out[name] = arr.astype(np.float32)
    return out


def check_params(cfg: GPTConfig, params: dict[str, np.ndarray]) -> None:
    """Refuse a parameter dict that does not fit the config, naming what differs."""
    check_param_shapes("GPT", param_shapes(cfg), params)


# ----------------------------------------------------------------------------- real weights

_PREFIXES = ("_orig_mod.", "transformer.")              # torch.compile's wrapper, GPT2LMHeadModel/nanoGPT
_BUFFER = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)")   # HF's causal-mask buffers, not parameters
_LINEAR = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def from_state_dict(mapping: Mapping[str, Any], n_head: int | None = None,
                    config: Mapping[str, Any] | None = None) -> tuple[GPTConfig, dict[str, np.ndarray]]:
    """(config, params) from a GPT-2 state dict as Hugging Face transformers (GPT2Model,
    GPT2LMHeadModel) or nanoGPT writes it. Values may be numpy arrays, torch tensors or
    anything numpy can read. Accepted:
      * names with or without the `transformer.` prefix (and torch.compile's `_orig_mod.`);
      * HF's Conv1D weights (in, out), fwbench's own layout, or nanoGPT's nn.Linear weights
        (out, in), recognised by c_attn's shape (3C, C) and transposed;
      * `lm_head.weight`, which must equal `wte.weight` (GPT-2 ties them) and is dropped;
      * HF's non-parameter buffers `h.{i}.attn.bias` / `attn.masked_bias`, ignored.
    block_size, vocab_size, n_embd and n_layer come from the shapes; the number of heads
    from `n_head`, else from `config` (a config.json mapping: `n_head`), else an error."""
    state: dict[str, np.ndarray] = {}
    for key, value in mapping.items():
        for prefix in _PREFIXES:
            key = key[len(prefix):] if key.startswith(prefix) else key
        if not _BUFFER.fullmatch(key):
            state[key] = np.asarray(host_values(value), np.float32)
    if "wte.weight" not in state or "wpe.weight" not in state:
        raise FwbenchError(f"not a GPT-2 state dict: no wte.weight/wpe.weight among {sorted(state)[:4]}...")
    head = state.pop("lm_head.weight", None)
    if head is not None and not np.array_equal(head, state["wte.weight"]):
        raise FwbenchError("lm_head.weight differs from wte.weight: fwbench's GPT-2 ties the output head "
                           "to the token embedding")
    c_attn = state.get("h.0.attn.c_attn.weight")
    if c_attn is not None and c_attn.ndim == 2 and c_attn.shape[0] == 3 * c_attn.shape[1]:
        state = {k: v.T.copy() if k.endswith(_LINEAR) else v for k, v in state.items()}  # nn.Linear (out, in)
    if n_head is None:
        n_head = (config or {}).get("n_head")
    if n_head is None:
        raise FwbenchError("the number of heads is not in the weights: pass n_head= (GPT-2 124M: 12) "
                           "or the checkpoint's config mapping")
    layers = {int(k.split(".")[1]) for k in state if k.startswith("h.")}
    (vocab, n_embd), block = state["wte.weight"].shape, state["wpe.weight"].shape[0]
    cfg = GPTConfig(block_size=block, vocab_size=vocab, n_layer=len(layers), n_head=int(n_head), n_embd=n_embd)
    check_params(cfg, state)
    return cfg, {k: state[k] for k in param_shapes(cfg)}


def load_weights(path: str, n_head: int | None = None) -> tuple[GPTConfig, dict[str, np.ndarray]]:
    """(config, params) from a `.safetensors` or `.npz` file of GPT-2 weights (see
    from_state_dict). Without n_head, a `config.json` beside the file (the Hugging Face
    layout) gives it."""
    ext = os.path.splitext(path)[1]
    if ext == ".npz":
        with np.load(path) as f:
            state = {k: f[k] for k in f.files}
    elif ext == ".safetensors":
        try:
            from safetensors.numpy import load_file
        except ImportError:
            raise FwbenchError("reading .safetensors needs the safetensors package: "
                               "pip install safetensors (or pip install fwbench[weights])") from None
        state = load_file(path)
    else:
        raise FwbenchError(f"GPT-2 weights must be a .safetensors or .npz file, got {path!r}")
    config_json = os.path.join(os.path.dirname(path), "config.json")
    config = None
    if n_head is None and os.path.exists(config_json):
        with open(config_json) as f:
            config = json.load(f)
    return from_state_dict(state, n_head, config)


# ----------------------------------------------------------------------------- data

def make_batch(cfg: GPTConfig, batch: int, seed: int = 0, seq_len: int | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Seeded synthetic tokens (B, T) and next-token targets (B, T), int32."""
    T = cfg.block_size if seq_len is None else seq_len
    if not 0 < T <= cfg.block_size:
        raise FwbenchError(f"sequence length {T} must be in 1..block_size ({cfg.block_size})")
    seq = np.random.default_rng(seed).integers(0, cfg.vocab_size, (batch, T + 1), dtype=np.int32)
    return seq[:, :-1].copy(), seq[:, 1:].copy()


# ----------------------------------------------------------------------------- FLOPs

def n_params(cfg: GPTConfig, non_embedding: bool = True) -> int:
    """Parameter count. With non_embedding, position embeddings are left out (they are
    a lookup, not a matmul); the token embedding stays because it is also the output head."""
    n = sum(int(np.prod(s)) for s in param_shapes(cfg).values())
    return n - cfg.block_size * cfg.n_embd if non_embedding else n


def flops_per_token(cfg: GPTConfig, context: int, training: bool) -> float:
    """Model FLOPs per token at a given attention context length.

    Source: PaLM (Chowdhery et al. 2022), Appendix B, as used by nanoGPT's
    `estimate_mfu`: training = 6N + 12 L H Q T, with N the non-embedding parameters,
    L layers, H heads, Q head size, T context. The forward pass is a third of it,
    2N + 4 L H Q T (each weight: one multiply-add per token; attention: QK^T and AV).
    """
    fwd = 2 * n_params(cfg) + 4 * cfg.n_layer * cfg.n_embd * context
    return 3.0 * fwd if training else float(fwd)


def head_flops(cfg: GPTConfig) -> float:
    """FLOPs of the output head (x @ wte^T) for one position: part of flops_per_token."""
    return 2.0 * cfg.vocab_size * cfg.n_embd


def generate_flops(cfg: GPTConfig, batch: int, prompt_len: int, n_new: int) -> float:
    """Model FLOPs of greedy decoding: a forward pass over the prompt (which yields the
    first new token), then n_new-1 single-token steps attending to a growing context.
    The prefill applies the head to the last prompt position only (every framework's
    generate does), so the head is counted once per sequence there, not per prompt token."""
    prefill = prompt_len * (flops_per_token(cfg, prompt_len, training=False) - head_flops(cfg)) + head_flops(cfg)
    decode = sum(flops_per_token(cfg, prompt_len + j, training=False) for j in range(1, n_new))
    return batch * (prefill + decode)


# ----------------------------------------------------------------------------- tasks

POOL = 4  # input batches rotated through the timed rounds


def generate_lengths(cfg: GPTConfig) -> tuple[int, int]:
    """(prompt length, new tokens) used by the generate task: a quarter block each."""
    q = max(1, cfg.block_size // 4)
    return q, q


def strategies(framework: str, mode: str, task: str) -> tuple[str | None, ...]:
    """The case variants (records' `strategy`) of one framework, mode and task: None is the
    default; the others are timed as cases of their own (workloads.base.train_step_strategies)."""
    return train_step_strategies(framework, mode, task)


def task_spec(cfg: GPTConfig, batch: int, task: str, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """Inputs, items and FLOPs of one task (the same for every strategy of it)."""
    choose("GPT task", task, TASKS)
    T = cfg.block_size
    batches = [make_batch(cfg, batch, seed + i) for i in range(POOL)]
    shape = f"B={batch},T={T}"
    if task == "forward":
        return TaskSpec(task, "logits", tuple((x,) for x, _ in batches), batch * T, "tokens",
                        batch * T * flops_per_token(cfg, T, training=False), shape)
    if task == "train_step":
        return TaskSpec(task, "train_step", tuple(batches), batch * T, "tokens",
                        batch * T * flops_per_token(cfg, T, training=True), shape,
                        note="AdamW step, params updated in place", mutates=True)
    t0, n_new = generate_lengths(cfg)
    return TaskSpec(task, "generate", tuple((x[:, :t0].copy(),) for x, _ in batches), batch * n_new,
                    "tokens", generate_flops(cfg, batch, t0, n_new),
                    f"B={batch},prompt={t0},new={n_new}", kwargs={"n_new": n_new},
                    note="greedy, KV cache sized to block_size")


# ----------------------------------------------------------------------------- interface

@runtime_checkable
class GPTModel(Protocol):
    """What every framework's GPT implements (frameworks/<fw>/gpt.py, `build`).

    Arrays in and out are the framework's own, made from numpy by the adapter's
    `asarray` (outside any timed region); `adapter.to_numpy` turns results back.

    build(adapter, config, params, case) -> GPTModel
    """
    config: GPTConfig
    mode: str
    device: str
    # method -> the attention its program runs where that differs from the framework's for the
    # device and precision (adapter.attention_impl, which the record names otherwise); {} where
    # none does (JAX's gradient programs on the CPU: frameworks/jax/gpt.py, Forms)
    attention_impls: Mapping[str, str]

    def logits(self, tokens: Any) -> Any:
        """(B, T) int32 -> (B, T, vocab_size) float32."""

    def loss(self, tokens: Any, targets: Any) -> Any:
        """Mean token cross-entropy, a float32 scalar."""

    def grads(self, tokens: Any, targets: Any) -> dict[str, Any]:
        """Gradient of `loss` for every parameter, keyed by the parameter names."""

    def train_step(self, tokens: Any, targets: Any) -> Any:
        """One AdamW step (OPTIMIZER, with clipping) on the model's own parameters and
        optimizer state; returns the loss before the step."""

    def generate(self, prompt: Any, n_new: int, use_cache: bool = True) -> Any:
        """Greedy decoding: (B, T0) -> (B, T0 + n_new) int32. With use_cache, a key/value
        cache sized to block_size keeps shapes static; without, each step reruns the
        full forward pass (the reference the cache must match token for token)."""

    def export_params(self) -> dict[str, np.ndarray]:
        """The current parameters, back in the numpy layout of `init_params`."""


# ----------------------------------------------------------------------------- reference

def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LN_EPS) * w + b


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def reference_logits(cfg: GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray) -> np.ndarray:
    """Numpy float64 forward pass: the ground truth the frameworks are tested against."""
    cfg.check_tokens(tokens)
    p = {k: v.astype(np.float64) for k, v in params.items()}
    B, T = tokens.shape
    nh, hs = cfg.n_head, cfg.head_size
    x = p["wte.weight"][tokens] + p["wpe.weight"][:T]                    # (B, T, C)
    causal = np.tril(np.ones((T, T), dtype=bool))
    for i in range(cfg.n_layer):
        h = f"h.{i}."
        a = _layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # (B, T, 3C)
        q, k, v = (t.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)           # (B, nh, T, hs)
                   for t in np.split(qkv, 3, axis=-1))
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)                  # (B, nh, T, T)
        att = np.where(causal, att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, -1)              # (B, T, C)
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = _layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        m = gelu_tanh(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = _layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].T                                           # (B, T, vocab)


def reference_loss(cfg: GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray,
                   targets: np.ndarray) -> float:
    logits = reference_logits(cfg, params, tokens)
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(-np.take_along_axis(logp, targets[..., None].astype(np.int64), -1).mean())


def reference_generate(cfg: GPTConfig, params: dict[str, np.ndarray], prompt: np.ndarray, n_new: int) -> np.ndarray:
    """Greedy decoding by full recomputation, float64."""
    seq = np.asarray(prompt)
    for _ in range(n_new):
        nxt = reference_logits(cfg, params, seq)[:, -1].argmax(-1).astype(seq.dtype)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    return seq


# What every framework's build returns: tests/test_conformance.py checks each against it.
MODEL = GPTModel
