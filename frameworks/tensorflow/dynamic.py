"""workloads.dynamic in TensorFlow: the GPT prefill of a stream of prompts of varying
length. graph = tf.function, compiled = tf.function(jit_compile=True), each with TF's ways
with a varying dimension: the default (a trace per new shape), an input_signature with None
dimensions (one trace), reduce_retracing=True. Traces are counted by the adapter (every
tf.function is made through it); XLA's own compilations under TF are not exposed to Python,
so a per-shape XLA compile shows only in the first request of each shape's latency."""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from frameworks.base import Unsupported
from frameworks.tensorflow.gpt import TFGPT, dims
from workloads import dynamic as D

TRACED = (None, "input_signature", "reduce_retracing", "bucketed")


class TFPrefill:
    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str,
                 device: str, strategy: str | None) -> None:
        why = D.lacks("tensorflow", mode, strategy, TRACED, "tf.function traces per input signature")
        if why:
            raise Unsupported(why)
        self.config, self.mode, self.strategy = config, mode, strategy
        self.gpt = TFGPT(adapter, config.gpt, params, "eager", device)
        self._device = adapter.tf_device(device)
        self._fn = self._prefill_fn
        if mode != "eager":
            kw: dict[str, Any] = {"jit_compile": mode == "compiled"}
            if strategy == "input_signature":
                kw["input_signature"] = (tf.TensorSpec((config.batch, None), tf.int32),
                                         tf.TensorSpec((config.batch,), tf.int32))
            elif strategy == "reduce_retracing":
                kw["reduce_retracing"] = True
            self._fn = adapter.function(self._prefill_fn, **kw)

    def _prefill_fn(self, idx: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
        model = self.gpt.model
        x, _ = model(idx)                                                          # (B*T, C)
        B, T = dims(idx)
        x = tf.gather(tf.reshape(x, (B, T, self.config.gpt.n_embd)), last, batch_dims=1)  # (B, C)
        return model.head(x)

    def prefill(self, tokens: tf.Tensor, last: tf.Tensor) -> tf.Tensor:
        self.config.gpt.check_tokens(tokens)
        with tf.device(self._device):
            return self._fn(tokens, last)


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str, device: str,
          strategy: str | None = None) -> TFPrefill:
    return TFPrefill(adapter, config, params, mode, device, strategy)
