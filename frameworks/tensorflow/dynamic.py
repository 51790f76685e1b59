"""workloads.dynamic in TensorFlow: the GPT prefill, generate and train streams of varying
length (generate's decode steps in a tf.while_loop; train under a GradientTape), each request
kind its own tf.function. graph = tf.function, compiled = tf.function(jit_compile=True),
each with TF's ways with a varying dimension: the default (a trace per new shape), an
input_signature with None dimensions (one trace), reduce_retracing=True. Traces are counted by the adapter (every
tf.function is made through it); XLA's own compilations under TF are counted apart, from the
entries XLA writes to TF's persistent cache folder (the adapter's xla_compilations), so a
compile per concrete shape under one trace shows there as well as in each new shape's
latency. Also the DDPM denoiser stream and prefill_int (the length a Python int)."""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from frameworks.tensorflow.gpt import TFGPT, dims
from workloads import dynamic as D
from workloads.base import Model
from workloads.case import Case
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only

TRACED = (None, "input_signature", "reduce_retracing", "bucketed")
WHY = "tf.function traces per input signature"


def _function_kwargs(mode: str, strategy: str | None, signature: Any) -> dict[str, Any]:
    """tf.function's arguments for a mode and strategy: jit_compile in compiled mode, the
    `signature` (specs with None dims) for input_signature, reduce_retracing for its own."""
    kw: dict[str, Any] = {"jit_compile": mode == "compiled"}
    if strategy == "input_signature":
        kw["input_signature"] = signature
    elif strategy == "reduce_retracing":
        kw["reduce_retracing"] = True
    return kw


class TFPrefill(Model):
    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        mode, device, strategy = case.mode, case.device, case.strategy
        self.config, self.mode, self.strategy = config, mode, strategy
        self.gpt = TFGPT(adapter, config.gpt, params, case.but(mode="eager", strategy=None))
        self._device = adapter.tf_device(device)
        self._place = adapter.placement(device)
        self._fn, self._generate, self._train = self._prefill_fn, self._generate_fn, self._train_fn
        if mode != "eager":
            def function(fn: Any, *signature: tf.TensorSpec) -> Any:
                return adapter.function(fn, **_function_kwargs(mode, strategy, signature))

            B, TB = config.batch, config.train_batch
            tokens, last = tf.TensorSpec((B, None), tf.int32), tf.TensorSpec((B,), tf.int32)
            self._fn = function(self._prefill_fn, tokens, last)
            self._generate = function(self._generate_fn, tokens, last)
            self._train = function(self._train_fn, *(tf.TensorSpec((TB, None), dt)
                                                     for dt in (tf.int32, tf.int32, tf.float32)))

    def _prefill_fn(self, idx: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
        model = self.gpt.net
        x, _ = model.hidden(idx)                                                          # (B*T, C)
        B, T = dims(idx)
        x = tf.gather(tf.reshape(x, (B, T, self.config.gpt.n_embd)), last, batch_dims=1)  # (B, C)
        return model.head(x)

    def prefill(self, tokens: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
        with self._place:
            return self._fn(tokens, last)

    # -- generate: TFGPT's cached decoding, started at the real last position ---------------
    def _generate_fn(self, idx: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
        """Greedy new tokens (B, new_tokens) of the (padded) prompts idx (B, P). The prefill's
        keys and values of a bucket's padding sit in the caches at positions >= last + 1;
        each decode step writes its own there first and attends only to positions <= its
        own, so no query ever sees the padding."""
        cfg, n, model = self.config.gpt, self.config.new_tokens, self.gpt.net
        B, P = dims(idx)
        x, kv = model.hidden(idx)                                                          # prefill
        pad = [[0, 0], [0, 0], [0, cfg.block_size - P], [0, 0]]
        shape = (None, cfg.n_head, cfg.block_size, cfg.head_size)   # static: one loop shape
        cache = [(tf.ensure_shape(tf.pad(k, pad), shape), tf.ensure_shape(tf.pad(v, pad), shape)) for k, v in kv]
        x = tf.gather(tf.reshape(x, (B, P, cfg.n_embd)), last, batch_dims=1)       # (B, C)
        tok = tf.argmax(model.head(x), axis=-1, output_type=idx.dtype)              # (B,)

        def write(out: tf.Tensor, j: Any, tok: tf.Tensor) -> tf.Tensor:
            return tf.where(tf.range(n)[None, :] == j, tok[:, None], out)

        def step(j, tok, out, cache):  # new token j sits at position last + 1 + j
            logits, cache = model.decode(tok, last[0] + 1 + j, cache)
            tok = tf.argmax(logits, axis=-1, output_type=idx.dtype)
            return j + 1, tok, write(out, j + 1, tok), cache

        out = write(tf.zeros((B, n), idx.dtype), 0, tok)
        return tf.while_loop(lambda j, *_: j < n - 1, step, (tf.constant(0), tok, out, cache))[2]

    def generate(self, tokens: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
        with self._place:
            return self._generate(tokens, last)

    # -- train: loss and gradients, padded targets weighted out ---------------------------------
    def _train_fn(self, idx: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """sum(w * ce) / sum(w) over every token (the padding's weight is 0), and its gradients."""
        model, variables = self.gpt.net, list(self.gpt.net.named.values())
        with tf.GradientTape() as tape:
            x, _ = model.hidden(idx)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.reshape(targets, (-1,)), model.head(x))
            w = tf.reshape(weights, (-1,))
            loss = tf.reduce_sum(ce * w) / tf.reduce_sum(w)
        # wte is both gathered (sparse gradient) and the head (dense): one dense tensor, as TFGPT
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]

    def train(self, tokens: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor) -> dict[str, tf.Tensor]:
        with self._place:
            loss, grads = self._train(tokens, targets, weights)
        return {"loss": loss, **dict(zip(self.gpt.net.named, grads))}


class TFDdpm(Model):
    """The ddpm stream: frameworks/tensorflow/diffusion.py's UNet module under tf.function as
    the strategy says; input_signature leaves the batch and both image dimensions None."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        mode, device, strategy = case.mode, case.device, case.strategy
        from frameworks.tensorflow.diffusion import TFDiffusion
        self.config, self.mode, self.strategy = config, mode, strategy
        self.net = TFDiffusion(adapter, config.unet, params, case.but(mode="eager", strategy=None)).net
        self._device = adapter.tf_device(device)
        self._place = adapter.placement(device)
        self._fn = self.net.__call__
        if mode != "eager":
            C = config.unet.in_channels
            self._fn = adapter.function(self.net.__call__, **_function_kwargs(
                mode, strategy, (tf.TensorSpec((None, None, None, C), tf.float32), tf.TensorSpec((None,), tf.int32))))

    def eps(self, x: tf.Tensor, t: tf.Tensor) -> tf.Tensor:
        with self._place:
            return self._fn(x, t)


class TFPrefillInt(TFPrefill):
    """prefill_int: a Python int argument is part of tf.function's trace key, so every new
    length traces (and, under jit_compile, compiles) again, reduce_retracing or not; an
    input_signature holds tensor specs only."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        super().__init__(adapter, config, params, case.but(mode="eager", strategy=None))
        mode, strategy = case.mode, case.strategy
        self.mode, self.strategy = mode, strategy
        self._int = self._int_fn
        if mode != "eager":
            self._int = adapter.function(self._int_fn, **_function_kwargs(mode, strategy, None))

    def _int_fn(self, idx: tf.Tensor, length: int) -> tf.Tensor:
        model = self.gpt.net
        x, _ = model.hidden(idx[:, :length])                                             # (B*length, C)
        return model.head(tf.reshape(x, (-1, length, self.config.gpt.n_embd))[:, -1])

    def prefill_int(self, tokens: tf.Tensor, length: int) -> tf.Tensor:
        self.config.check_int_length(tokens.shape[1], length)
        with self._place:
            return self._int(tokens, length)


MODELS = D.Models("tensorflow", TFPrefill, TFDdpm, TFPrefillInt, TRACED, WHY, (None, "reduce_retracing"),
                  "a Python int argument is part of tf.function's trace key, so the default already traces per "
                  "value, and an input_signature holds tensor specs only")


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> D.ByTask:
    return D.build(MODELS, adapter, config, params, case)
