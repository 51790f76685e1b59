"""Serving TensorFlow's GPT and DDPM UNet (workloads/serving.py): the functions a service runs,
made of frameworks/tensorflow/gpt.py's and diffusion.py's modules, and their deployable forms.

    prefill   tokens (B, T) int32 -> next token (B,) int32, its logits (B, vocab), then each
              layer's key and value caches (B, nh, block_size, hs), zeros past T
    decode    token (B,) int32, position (1,) int32, the caches -> the same
    step      x (B, H, W, C), t (B,) int32, a, b (1,) float32 -> a x + b eps(x, t)

Each is a method of Functions, a tf.Module holding the model's variables, with an input
signature whose batch (and the prompt's length) is None. Paths (workloads.serving.PATHS): the
methods eagerly, as tf.functions, and as tf.functions with jit_compile (the development path:
dev_engine, in the serving process); "saved-model": the module saved by tf.saved_model with its
tf.functions (graph mode) or its jit_compile tf.functions (compiled mode: the SavedModel keeps
the attribute, XLA compiles each shape when served); "onnx": the tf.functions converted by
tf2onnx, served by ONNX Runtime.
"""
from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from frameworks.servables import PRECISIONS, Servable, refused, tf2onnx_files  # noqa: F401  (PRECISIONS: Adapter.build reads it)
from frameworks.serve import Engine
from frameworks.tensorflow.diffusion import UNet
from frameworks.tensorflow.gpt import GPT, dims
from workloads import diffusion as D
from workloads import gpt as G
from workloads.case import Case


class Functions(tf.Module):
    """The task's servable functions over the model's variables: each a tf.function with its
    input signature (jit_compile in compiled mode), or the plain method in eager mode."""

    def __init__(self, model_preset: str, params: dict[str, Any], task: str, mode: str) -> None:
        super().__init__(name="serving")
        self.task = task
        if task == "generate":
            self.cfg = g = G.preset(model_preset).config
            self.net = GPT(g, params)
            cache = tf.TensorSpec((None, g.n_head, g.block_size, g.head_size), tf.float32)
            specs = {"prefill": [tf.TensorSpec((None, None), tf.int32)],
                     "decode": [tf.TensorSpec((None,), tf.int32), tf.TensorSpec((1,), tf.int32),
                                *[cache] * (2 * g.n_layer)]}
        else:
            d = D.preset(model_preset).config
            self.net = UNet(d, params)
            S, C = d.image_size, d.in_channels
            specs = {"step": [tf.TensorSpec((None, S, S, C), tf.float32), tf.TensorSpec((None,), tf.int32),
                              tf.TensorSpec((1,), tf.float32), tf.TensorSpec((1,), tf.float32)]}
        self.specs = specs
        for name, sig in specs.items():
            fn = getattr(self, "_" + name)
            setattr(self, name, fn if mode == "eager" else
                    tf.function(fn, input_signature=sig, jit_compile=mode == "compiled"))

    def _prefill(self, tokens):
        g = self.cfg
        B, T = dims(tokens)
        x, kv = self.net.hidden(tokens)                                          # (B*T, C); (B, nh, T, hs) each
        pad = [[0, 0], [0, 0], [0, g.block_size - T], [0, 0]]
        caches = [tf.pad(t, pad) for k, v in kv for t in (k, v)]
        logits = self.net.head(tf.reshape(x, (B, T, g.n_embd))[:, -1])
        return (tf.argmax(logits, -1, output_type=tokens.dtype), logits, *caches)

    def _decode(self, token, pos, *caches):
        kv = [(caches[i], caches[i + 1]) for i in range(0, len(caches), 2)]
        logits, kv = self.net.decode(token, pos[0], kv)
        return (tf.argmax(logits, -1, output_type=token.dtype), logits, *(t for k, v in kv for t in (k, v)))

    def _step(self, x, t, a, b):
        return a * x + b * self.net(x, t)


def dev_engine(adapter: Any, model_preset: str, params: dict[str, Any], task: str, mode: str) -> Engine:
    """The development path: the functions eagerly, as tf.functions, or with jit_compile."""
    f = Functions(model_preset, params, task, mode)
    return Engine({name: getattr(f, name) for name in f.specs}, lambda x: adapter.asarray(x, "cpu"),
                  adapter.to_numpy, keep=[f])


def dims_text(task: str) -> str:
    return "batch, prompt length (prefill); batch (decode)" if task == "generate" else "batch"


class TFServable(Servable):
    FRAMEWORK = "tensorflow"
    EXPORTS = {"saved-model": "saved_model", "onnx": "onnx"}

    def saved_model(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        f = Functions(self.model_preset, self.params, self.task, self.case.mode)
        path = os.path.join(folder, "saved_model")
        with refused("tf.saved_model.save"):
            tf.saved_model.save(f, path)
        xla = " with jit_compile" if self.case.mode == "compiled" else ""
        return ({"engine": "saved-model", "files": {"saved_model": path}, "functions": list(f.specs)},
                {"exporter": f"tf.saved_model{xla} (tensorflow {tf.__version__})",
                 "dynamic_dims": dims_text(self.task)})

    def onnx(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        import tf2onnx
        f = Functions(self.model_preset, self.params, self.task, "graph")
        files = tf2onnx_files({name: (getattr(f, name), sig) for name, sig in f.specs.items()}, folder, "tf2onnx")
        return ({"engine": "onnx", "files": files},
                {"exporter": f"tf2onnx {tf2onnx.__version__} (tensorflow {tf.__version__})",
                 "dynamic_dims": dims_text(self.task)})


def build(adapter: Any, config: Any, params: dict[str, Any], case: Case) -> TFServable:
    return TFServable(adapter, config, params, case)
