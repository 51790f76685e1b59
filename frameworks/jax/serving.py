"""Serving JAX's GPT and DDPM UNet (workloads/serving.py): the functions a service runs, made of
frameworks/jax/gpt.py's and diffusion.py's functions, and their deployable forms. Each takes
the parameters (a dict, GPT-2's names) first, as the model's own functions do:

    prefill   p, tokens (B, T) int32 -> next token (B,) int32, its logits (B, vocab), then each
              layer's key and value caches (B, nh, block_size, hs), zeros past T
    decode    p, token (B,) int32, position (1,) int32, the caches -> the same
    step      p, x (B, H, W, C), t (B,) int32, a, b (1,) float32 -> a x + b eps(x, t)

Paths (workloads.serving.PATHS): the functions op by op and under jax.jit (the development
path: dev_engine, in the serving process); "jax-export": each function jax.export'ed with the
batch (and the prompt length, bounded by block_size: a symbolic shape's constraint) symbolic,
serialised, beside the weights (.npz); "jax2tf": each converted by jax2tf with the same
polymorphic shapes, the weights as tf.Variables, into a SavedModel (jax2tf's serving recipe);
"onnx": that SavedModel's functions converted by tf2onnx, served by ONNX Runtime.
"""
from __future__ import annotations

import os
from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from frameworks.jax import diffusion as JD
from frameworks.jax import gpt as JG
from frameworks.servables import PRECISIONS, Servable, refused, tf2onnx_files  # noqa: F401  (PRECISIONS: Adapter.build reads it)
from frameworks.serve import Engine
from workloads import diffusion as D
from workloads import gpt as G
from workloads.case import Case


def prefill(p: dict[str, jax.Array], tokens: jax.Array, *, cfg: G.GPTConfig) -> tuple[jax.Array, ...]:
    B, T = tokens.shape
    x, kv = JG.hidden(p, tokens, cfg=cfg)                                   # (B*T, C)
    pad = ((0, 0), (0, 0), (0, cfg.block_size - T), (0, 0))
    caches = [jnp.pad(t.swapaxes(1, 2), pad) for k, v in kv for t in (k, v)]   # (B, nh, S, hs)
    logits = JG.head(p, x.reshape(B, T, -1)[:, -1])                          # the last position only
    return (jnp.argmax(logits, -1).astype(tokens.dtype), logits, *caches)


def decode(p: dict[str, jax.Array], token: jax.Array, pos: jax.Array, *caches: jax.Array,
           cfg: G.GPTConfig) -> tuple[jax.Array, ...]:
    kv = [(caches[i], caches[i + 1]) for i in range(0, len(caches), 2)]
    x, kv = JG.hidden(p, token[:, None], cfg=cfg, kv=kv, pos=pos[0])
    logits = JG.head(p, x)
    return (jnp.argmax(logits, -1).astype(token.dtype), logits, *(t for k, v in kv for t in (k, v)))


def step(p: dict[str, jax.Array], x: jax.Array, t: jax.Array, a: jax.Array, b: jax.Array, *,
         cfg: D.DiffusionConfig) -> jax.Array:
    return a * x + b * JD.eps(p, x, t, cfg=cfg)


def functions(model_preset: str, task: str) -> dict[str, Callable[..., Any]]:
    """The task's servable functions of (params, *args), eager."""
    if task == "generate":
        cfg = G.preset(model_preset).config
        return {"prefill": partial(prefill, cfg=cfg), "decode": partial(decode, cfg=cfg)}
    return {"step": partial(step, cfg=D.preset(model_preset).config)}


def dev_engine(adapter: Any, model_preset: str, params: dict[str, Any], task: str, mode: str) -> Engine:
    """The development path: the functions op by op, or each under jax.jit; the parameters
    on the device, passed as the first argument."""
    p = {k: adapter.asarray(v, "cpu") for k, v in params.items()}
    wrap = jax.jit if mode == "compiled" else (lambda f: f)
    fns = {k: partial(wrap(f), p) for k, f in functions(model_preset, task).items()}
    return Engine(fns, lambda x: adapter.asarray(x, "cpu"), adapter.to_numpy)


def arguments(task: str, config: Any) -> dict[str, list[tuple[tuple[int | str, ...], str]]]:
    """Each function's arguments after the parameters: (shape, dtype), a dynamic dimension named
    (b: the batch; t: the prompt's length, at most block_size)."""
    if task == "generate":
        g = config.gpt
        cache = (("b", g.n_head, g.block_size, g.head_size), "float32")
        return {"prefill": [(("b", "t"), "int32")],
                "decode": [(("b",), "int32"), ((1,), "int32"), *[cache] * (2 * g.n_layer)]}
    d = config.diffusion
    return {"step": [(("b", d.image_size, d.image_size, d.in_channels), "float32"), (("b",), "int32"),
                     ((1,), "float32"), ((1,), "float32")]}


def constraints(names: set[str], config: Any) -> tuple[str, ...]:
    return (f"t <= {config.gpt.block_size}",) if "t" in names else ()


def symbolic(args: list[tuple[tuple[int | str, ...], str]], params: dict[str, Any], config: Any) -> tuple[Any, ...]:
    """jax.export's arguments: the parameters' shapes, then each argument's with its named
    dimensions symbolic (one scope, the length's bound a constraint)."""
    names = sorted({d for shape, _ in args for d in shape if isinstance(d, str)})
    syms = dict(zip(names, export.symbolic_shape(", ".join(names), constraints=constraints(set(names), config))))
    return ({k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in params.items()},
            *(jax.ShapeDtypeStruct(tuple(syms.get(d, d) for d in shape), dtype) for shape, dtype in args))


def dims(task: str) -> str:
    return "batch, prompt length up to block_size (prefill); batch (decode)" if task == "generate" else "batch"


class JaxServable(Servable):
    FRAMEWORK = "jax"
    EXPORTS = {"jax-export": "jax_export", "jax2tf": "jax2tf", "onnx": "onnx"}

    def _weights(self, folder: str) -> str:
        path = os.path.join(folder, "weights.npz")
        np.savez(path, **self.params)
        return path

    def jax_export(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        files = {"weights": self._weights(folder)}
        args = arguments(self.task, self.config)
        for name, fn in functions(self.model_preset, self.task).items():
            with refused("jax.export"):
                blob = export.export(jax.jit(fn))(*symbolic(args[name], self.params, self.config)).serialize()
            files[name] = os.path.join(folder, f"{name}.jaxexport")
            with open(files[name], "wb") as f:
                f.write(blob)
        return ({"engine": "jax-export", "files": files},
                {"exporter": f"jax.export (jax {jax.__version__})", "dynamic_dims": dims(self.task)})

    def _tf_module(self) -> tuple[Any, dict[str, Any]]:
        """A tf.Module holding the weights as tf.Variables and each function converted by
        jax2tf with the batch (and length) polymorphic; its functions' input signatures."""
        import frameworks
        frameworks.load("tensorflow").configure(self.adapter.threads)   # TensorFlow set up as fwbench's processes do
        import tensorflow as tf
        from jax.experimental import jax2tf
        m = tf.Module()
        m.params = {k: tf.Variable(v, trainable=False, name=k.replace(".", "_")) for k, v in self.params.items()}
        signatures = {}
        for name, fn in functions(self.model_preset, self.task).items():
            args = arguments(self.task, self.config)[name]
            specs = [tf.TensorSpec([None if isinstance(d, str) else d for d in shape], dtype) for shape, dtype in args]
            poly = [None, *("(" + ", ".join(map(str, shape)) + ",)" for shape, _ in args)]
            names = {d for shape, _ in args for d in shape if isinstance(d, str)}
            with refused("jax2tf"):
                conv = jax2tf.convert(fn, with_gradient=False, polymorphic_shapes=poly,
                                      polymorphic_constraints=constraints(names, self.config))
                setattr(m, name, tf.function(partial(lambda c, *a: c(m.params, *a), conv), input_signature=specs,
                                             autograph=False))
            signatures[name] = specs
        return m, signatures

    def jax2tf(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        import tensorflow as tf
        m, signatures = self._tf_module()
        path = os.path.join(folder, "saved_model")
        with refused("jax2tf SavedModel (tf.saved_model.save)"):
            tf.saved_model.save(m, path)
        return ({"engine": "saved-model", "files": {"saved_model": path}, "functions": list(signatures)},
                {"exporter": f"jax2tf (jax {jax.__version__}) + tf.saved_model (tensorflow {tf.__version__})",
                 "dynamic_dims": dims(self.task)})

    def onnx(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        import tf2onnx
        m, signatures = self._tf_module()
        files = tf2onnx_files({name: (getattr(m, name), specs) for name, specs in signatures.items()}, folder,
                              "tf2onnx of jax2tf's function")
        return ({"engine": "onnx", "files": files},
                {"exporter": f"jax2tf (jax {jax.__version__}) + tf2onnx {tf2onnx.__version__}",
                 "dynamic_dims": dims(self.task)})


def build(adapter: Any, config: Any, params: dict[str, Any], case: Case) -> JaxServable:
    return JaxServable(adapter, config, params, case)
