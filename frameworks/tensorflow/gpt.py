"""GPT-2 in low-level TensorFlow 2: tf.Modules holding tf.Variables, ops from tf.nn and
tf.linalg, gradients from tf.GradientTape. Same maths as workloads/gpt.py and nanoGPT's
model.py, which this file follows top-down: LayerNorm, CausalSelfAttention, MLP, Block,
GPT, then the AdamW update and the GPTModel that fwbench calls.

The residual stream is kept flat, one row per token: x is (B*T, C). Every linear layer is
then one 2-D MatMul + BiasAdd on it, the shape TF's fast paths are written for (Grappler
fuses MatMul + BiasAdd into one kernel in graph mode, XLA needs no reshape around its
dots, and in eager mode a reshape per layer is an op less); only attention reshapes to
(B, nh, T, hs). Measured on the small preset, this beat (B, T, C) activations with
batched matmuls in all three modes.

Weights keep GPT-2's Conv1D layout (in, out), which is already y = x @ W + b, so params
load and export as plain copies (bit-exact round trip).

Precision (workloads/precision.py): every layer holds `compute`, the dtype of its products'
inputs, from TensorFlow's dtype table (frameworks/tensorflow/precision.py: COMPUTE[precision]),
and every product goes through that module's `matmul` and `attention`: float32 is tf.matmul
itself, the fp32 graph unchanged; bfloat16 casts the product's two inputs to bfloat16 and its
result back to float32 before anything else reads it. The products are the linear layers, the
attention's q k^T and p v, and the tied head; the variables, their gradients (the Cast's
gradient returns them to float32), the embedding gather, LayerNorm, softmax, GELU, the loss
and AdamW stay float32.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from frameworks.tensorflow import precision as P
from frameworks.tensorflow.optim import AdamWUpdate
from frameworks.tensorflow.precision import attention, matmul
from workloads.base import Model, attn_scale
from workloads.case import Case

# LN_EPS, OPTIMIZER, decayed, attn_scale and the primitives below are module-level names the
# model reads, so that a test can patch this framework's copy alone (tests/test_mutations.py).
from workloads.gpt import LN_EPS, OPTIMIZER, GPTConfig, check_params, decayed

PRECISIONS = P.PRECISIONS   # the policies build honours: TensorFlow's dtype table's (precision.py)


def dims(x) -> list:
    """x's shape: Python ints where known statically (always in eager mode, where a tensor in
    a shape would cost a slow fallback per op), else the dynamic size."""
    static, dynamic = x.shape.as_list(), None
    if None in static:
        dynamic = tf.shape(x)
    return [d if d is not None else dynamic[i] for i, d in enumerate(static)]


def variable(params: dict[str, np.ndarray], name: str, named: dict[str, tf.Variable]) -> tf.Variable:
    """A tf.Variable from the numpy parameter `name`, recorded in `named` under that name."""
    named[name] = tf.Variable(params[name], name=name)
    return named[name]


def gelu(x):
    return tf.nn.gelu(x, approximate=True)                               # GPT-2's GELU, tanh form


def layer_norm(x, w, b):
    """(x - mean) / sqrt(var + eps) * w + b over the last axis, mean and (biased) variance by
    ordinary ops, so that every derivative order is exact. Not tf.nn.moments: its variance is
    reduce_mean(squared_difference(x, stop_gradient(mean))) (TF 2.21's nn_impl.py), exact
    for the first derivative (the variance's gradient through the mean is zero) but wrong for
    the second (the variance's Hessian comes out (2/n) I, without the -2/n^2 1 1^T of the
    mean). Measured at tiny, H v of the GPT's loss with it: 2.2e-2 off the derivatives
    workload's check, 2.3e-2 on the worst whole tensor (tests/test_gpt_equivalence.py); with
    this form 2.3e-6 (the check's own difference error) and 4.7e-6. First derivatives, hence
    training, agree to float32 rounding (7.5e-7), step times within 1% (graph, XLA, eager;
    small preset). `moments_layer_norm` keeps the tf.nn.moments form."""
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    centred = x - mean
    var = tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True)
    return centred * tf.math.rsqrt(var + LN_EPS) * w + b


def moments_layer_norm(x, w, b):
    """The idiomatic TF LayerNorm: tf.nn.moments, as Keras 3's LayerNormalization on the TF
    backend computes it (keras.ops.layer_normalization -> ops.moments -> tf.nn.moments).
    Exact at first order only (see layer_norm); the derivatives workload's `moments` HVP
    strategy uses it, to show what idiomatic TensorFlow gives at second order."""
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + LN_EPS) * w + b


def cross_entropy(logits, targets):
    """Mean cross-entropy of logits (N, vocab) against integer targets (N,)."""
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits))


def causal_attention(q, k, v, compute=tf.float32):
    """`attention` with the causal mask; q, k, v (B, nh, T, hs)."""
    pos = tf.range(tf.shape(q)[2])
    return attention(q, k, v, attn_scale(q.shape[-1]), compute, pos[:, None] >= pos[None, :])


class LayerNorm(tf.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis, biased variance:
    `norm` (e.g. moments_layer_norm), else the module-level layer_norm, looked up at each
    call so that a test can patch it."""

    def __init__(self, params, prefix, named, norm=None):
        super().__init__()
        self.weight = variable(params, prefix + ".weight", named)
        self.bias = variable(params, prefix + ".bias", named)
        self.norm = norm

    def __call__(self, x):
        return (self.norm or layer_norm)(x, self.weight, self.bias)


class Linear(tf.Module):
    """y = x @ W + b with W in GPT-2's Conv1D layout (in, out); x is (rows, in). The
    product's inputs in `compute` (see `matmul`), the bias added in float32."""

    def __init__(self, params, prefix, named, compute=tf.float32):
        super().__init__()
        self.weight = variable(params, prefix + ".weight", named)
        self.bias = variable(params, prefix + ".bias", named)
        self.compute = compute

    def __call__(self, x):
        return tf.nn.bias_add(matmul(x, self.weight, self.compute), self.bias)


class CausalSelfAttention(tf.Module):
    """softmax(q k^T / sqrt(hs) + causal mask) v per head. TF has no fused attention op, so
    the scores are explicit; XLA fuses the scale, mask and softmax in compiled mode."""

    def __init__(self, config, params, prefix, named, compute=tf.float32):
        super().__init__()
        self.n_head, self.n_embd = config.n_head, config.n_embd
        self.c_attn = Linear(params, prefix + ".c_attn", named, compute)
        self.c_proj = Linear(params, prefix + ".c_proj", named, compute)
        self.compute = compute

    def __call__(self, x, B, T, mask, cache=None):
        """x (B*T, C); mask (T, Tk) bool, True where a query may see a key.

        With `cache` = (k_cache, v_cache, at) the T new positions' keys and values are
        written into the (B, nh, block_size, hs) caches where `at` (block_size, 1) is True,
        and the queries attend to the whole cache (Tk = block_size). Returns y (B*T, C) and
        the keys and values attended to, (B, nh, Tk, hs) each.
        """
        nh, C = self.n_head, self.n_embd
        hs = C // nh
        q, k, v = tf.split(self.c_attn(x), 3, axis=-1)                         # (B*T, C) each
        q, k, v = (tf.transpose(tf.reshape(z, (B, T, nh, hs)), (0, 2, 1, 3))   # (B, nh, T, hs)
                   for z in (q, k, v))
        if cache is not None:
            k_cache, v_cache, at = cache
            k = tf.where(at, k, k_cache)                                       # (B, nh, block, hs)
            v = tf.where(at, v, v_cache)
        y = attention(q, k, v, attn_scale(hs), self.compute, mask)             # (B, nh, T, hs)
        y = tf.reshape(tf.transpose(y, (0, 2, 1, 3)), (B * T, C))              # heads side by side
        return self.c_proj(y), (k, v)


class MLP(tf.Module):
    def __init__(self, params, prefix, named, compute=tf.float32):
        super().__init__()
        self.c_fc = Linear(params, prefix + ".c_fc", named, compute)
        self.c_proj = Linear(params, prefix + ".c_proj", named, compute)

    def __call__(self, x):
        return self.c_proj(gelu(self.c_fc(x)))


class Block(tf.Module):
    """Pre-LayerNorm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config, params, prefix, named, norm=None, compute=tf.float32):
        super().__init__()
        self.ln_1 = LayerNorm(params, prefix + ".ln_1", named, norm)
        self.attn = CausalSelfAttention(config, params, prefix + ".attn", named, compute)
        self.ln_2 = LayerNorm(params, prefix + ".ln_2", named, norm)
        self.mlp = MLP(params, prefix + ".mlp", named, compute)

    def __call__(self, x, B, T, mask, cache=None):
        a, kv = self.attn(self.ln_1(x), B, T, mask, cache)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, kv


class GPT(tf.Module):
    """The network: token + position embeddings, n_layer blocks, final LayerNorm and the
    output head tied to the token embedding. `named` maps each GPT-2 parameter name to
    its tf.Variable, in the checkpoint's order. `norm`: the LayerNorm function (None: the
    module-level layer_norm, exact at every derivative order). `compute`: the dtype of every
    product's inputs (precision.COMPUTE[precision]; float32 or bfloat16)."""

    def __init__(self, config: GPTConfig, params: dict[str, np.ndarray], norm=None, compute=tf.float32):
        super().__init__(name="gpt")
        self.config = config
        self.compute = compute
        self.named: dict[str, tf.Variable] = {}
        self.wte = variable(params, "wte.weight", self.named)
        self.wpe = variable(params, "wpe.weight", self.named)
        self.h = [Block(config, params, f"h.{i}", self.named, norm, compute) for i in range(config.n_layer)]
        self.ln_f = LayerNorm(params, "ln_f", self.named, norm)

    def hidden(self, idx):
        """idx (B, T) int32 -> final-LayerNorm hidden states (B*T, C), and each layer's
        keys and values (B, nh, T, hs) (as frameworks/torch/gpt.py's and jax/gpt.py's hidden)."""
        B, T = dims(idx)
        x = tf.gather(self.wte, idx) + self.wpe[:T]                          # (B, T, C)
        x = tf.reshape(x, (B * T, self.config.n_embd))                       # (B*T, C)
        pos = tf.range(T)
        causal = pos[:, None] >= pos[None, :]                                # (T, T)
        kv = []
        for block in self.h:
            x, kv_i = block(x, B, T, causal)
            kv.append(kv_i)
        return self.ln_f(x), kv

    def head(self, x):
        """Final-LayerNorm hidden rows (rows, C) -> logits (rows, vocab): x @ wte^T (tied weights)."""
        return matmul(x, self.wte, self.compute, transpose_b=True)

    def logits(self, idx):
        x, _ = self.hidden(idx)
        B, T = dims(idx)
        return tf.reshape(self.head(x), (B, T, self.config.vocab_size))      # (B, T, vocab)

    def loss(self, idx, targets):
        """Mean token cross-entropy of the next-token targets (B, T)."""
        x, _ = self.hidden(idx)
        logits = self.head(x)                                                # (B*T, vocab)
        return cross_entropy(logits, tf.reshape(targets, (-1,)))

    def decode(self, tok, t, cache):
        """One greedy-decoding step: tok (B,) at position t (int32 scalar) attends to the
        cache [(k, v) (B, nh, block, hs) per layer] -> logits (B, vocab), updated cache."""
        B = dims(tok)[0]
        # the position's embedding by a gather, not self.wpe[t]: a strided slice of a variable
        # needs its begin as a compile-time constant in XLA, so under jit_compile TF keys the
        # program on t's value (measured: the compiled bucketed generate stream compiled once
        # per prompt length, 9 programs for 2 buckets at tiny); a gather's index is data
        x = tf.gather(self.wte, tok) + tf.gather(self.wpe, t)                # (B, C) = (B*1, C)
        pos = tf.range(self.config.block_size)
        seen = (pos <= t)[None, :]                                           # (1, block)
        at = (pos == t)[:, None]                                             # (block, 1)
        new_cache = []
        for block, (k, v) in zip(self.h, cache):
            x, kv = block(x, B, 1, seen, (k, v, at))
            new_cache.append(kv)
        return self.head(self.ln_f(x)), new_cache


def functional_call(module: tf.Module, params: Mapping[str, Any], method: str, *args: Any) -> Any:
    """getattr(module, method)(*args) with each of the module's tf.Variables named in `params`
    (by the name `module.named` gives it, GPT-2's) read as the tensor given there: a
    functional call of a tf.Module, as torch.func.functional_call is one of an nn.Module
    (which swaps the module's parameters the same way, for the call's duration).
    TensorFlow has none for a tf.Module (Keras 3's Layer.stateless_call is one for Keras
    layers). Under tracing (tf.function, tf.vectorized_map) the tensors are swapped in while
    the function is traced, so the graph reads them, not the variables; the variables are
    back in place when the call returns or raises."""
    slots = _variable_slots(module)
    by_id = {id(v): name for name, v in module.named.items()}
    swapped = [(owner, attr, getattr(owner, attr)) for owner, attr in slots
               if by_id.get(id(getattr(owner, attr))) in params]
    try:
        for owner, attr, var in swapped:
            object.__setattr__(owner, attr, params[by_id[id(var)]])   # plain attributes: no tracking
        return getattr(module, method)(*args)
    finally:
        for owner, attr, var in swapped:
            object.__setattr__(owner, attr, var)


def _variable_slots(module: tf.Module) -> list[tuple[tf.Module, str]]:
    """(owner, attribute) of every tf.Variable a module and its sub-modules (attributes,
    lists of modules) hold directly; `named`-like dicts are left alone. Cached per module."""
    cached = module.__dict__.get("_fwbench_slots")
    if cached is not None:
        return cached
    out: list[tuple[tf.Module, str]] = []

    def walk(m: tf.Module) -> None:
        for attr, value in vars(m).items():
            if attr.startswith("_"):
                continue
            if isinstance(value, tf.Variable):
                out.append((m, attr))
            elif isinstance(value, tf.Module):
                walk(value)
            elif isinstance(value, (list, tuple)) and all(isinstance(v, tf.Module) for v in value):
                for v in value:
                    walk(v)
    walk(module)
    object.__setattr__(module, "_fwbench_slots", out)
    return out


class TFGPT(Model):
    """fwbench's GPTModel in TensorFlow. In eager mode the methods run op by op; in graph and
    compiled modes each is one tf.function (compiled: jit_compile=True, the whole function
    one XLA program), made through the adapter so its traces are counted.

    reduce_retracing=True: a call with tensors of an already-seen shape reuses the trace,
    and a new shape makes one trace with unknown dims instead of one per shape, so a
    benchmark's rotated batches never retrace while the first trace keeps static shapes.
    """

    def __init__(self, adapter: Any, config: GPTConfig, params: dict[str, np.ndarray], case: Case) -> None:
        check_params(config, params)
        mode, device = case.mode, case.device
        self.adapter, self.config, self.mode, self.device = adapter, config, mode, device
        self._device = adapter.tf_device(device)
        self._place = adapter.placement(device)
        with self._place:
            self.net = GPT(config, params, compute=P.COMPUTE[case.precision])
            self.optimizer = AdamWUpdate(self.net.named, OPTIMIZER, decayed)
        self._vars = list(self.net.named.values())

        def fn(f):
            if mode == "eager":
                return f
            return adapter.function(f, jit_compile=mode == "compiled", reduce_retracing=True)

        self._logits = fn(self.net.logits)
        self._loss = fn(self.net.loss)
        self._grads = fn(self._grads_fn)
        self._train_step = fn(self._train_step_fn)
        self._generate_cached = fn(self._generate_cached_fn)

    # -- training --------------------------------------------------------------------
    def _grads_fn(self, idx, targets):
        with tf.GradientTape() as tape:
            loss = self.net.loss(idx, targets)
        grads = tape.gradient(loss, self._vars)
        # wte is both gathered (sparse gradient) and the head (dense): sum as one dense tensor
        return loss, [tf.convert_to_tensor(g) for g in grads]

    def _train_step_fn(self, idx, targets):
        loss, grads = self._grads_fn(idx, targets)
        self.optimizer(self._vars, grads)
        return loss

    # -- decoding ----------------------------------------------------------------------
    def _write(self, buf, t, tok):
        """buf (B, block) with column t replaced by tok (B,)."""
        return tf.where(tf.range(self.config.block_size)[None, :] == t, tok[:, None], buf)

    def _generate_cached_fn(self, prompt, n_new):
        """Greedy decoding with the KV cache: prefill the prompt (B, T0), then n_new - 1
        single-token steps, in a tf.while_loop (a Python loop when eager; one XLA While
        in compiled mode). Returns the (B, block) token buffer; columns >= T0 + n_new are 0."""
        cfg = self.config
        B, T0 = dims(prompt)
        x, kv = self.net.hidden(prompt)                                          # prefill
        pad = [[0, 0], [0, 0], [0, cfg.block_size - T0], [0, 0]]
        cache = [(tf.pad(k, pad), tf.pad(v, pad)) for k, v in kv]           # (B, nh, block, hs)
        last = tf.reshape(x, (B, T0, cfg.n_embd))[:, -1]                    # (B, C)
        tok = tf.argmax(self.net.head(last), axis=-1, output_type=prompt.dtype)  # (B,), int32/int64
        buf = self._write(tf.pad(prompt, [[0, 0], [0, cfg.block_size - T0]]), T0, tok)

        def step(t, tok, buf, cache):  # tok sits at position t; predict position t + 1
            logits, cache = self.net.decode(tok, t, cache)
            tok = tf.argmax(logits, axis=-1, output_type=prompt.dtype)
            return t + 1, tok, self._write(buf, t + 1, tok), cache

        end = T0 + n_new - 1
        _, _, buf, _ = tf.while_loop(lambda t, *_: t < end, step, (T0, tok, buf, cache))
        return buf

    def _generate_full(self, prompt, n_new):
        """The reference path, no cache: each new token from a full forward pass over the
        buffer padded to block_size (static shape; the causal mask keeps the padding out
        of every real position), read at the last real position."""
        T0 = prompt.shape[1]
        buf = tf.pad(prompt, [[0, 0], [0, self.config.block_size - T0]])
        for t in range(T0, T0 + n_new):
            logits = self._logits(buf)                                      # (B, block, vocab)
            buf = self._write(buf, t, tf.argmax(logits[:, t - 1], axis=-1, output_type=prompt.dtype))
        return buf

    # -- GPTModel ------------------------------------------------------------------------
    def logits(self, tokens):
        with self._place:
            return self._logits(tokens)

    def loss(self, tokens, targets):
        with self._place:
            return self._loss(tokens, targets)

    def grads(self, tokens, targets):
        with self._place:
            _, grads = self._grads(tokens, targets)
        return dict(zip(self.net.named, grads))

    def train_step(self, tokens, targets):
        with self._place:
            return self._train_step(tokens, targets)

    def generate(self, prompt, n_new: int, use_cache: bool = True):
        self.config.check_n_new(prompt.shape[1], n_new)
        B, T0 = prompt.shape
        if n_new == 0:
            return prompt
        with self._place:
            if use_cache:
                buf = self._generate_cached(prompt, tf.constant(n_new, tf.int32))
            else:
                buf = self._generate_full(prompt, n_new)
            return buf[:, :T0 + n_new]

    def export_params(self) -> dict[str, np.ndarray]:
        return {k: v.numpy() for k, v in self.net.named.items()}


def build(adapter: Any, config: GPTConfig, params: dict[str, np.ndarray], case: Case) -> TFGPT:
    return TFGPT(adapter, config, params, case)
