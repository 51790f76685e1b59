"""workloads.dynamic in JAX: the GPT prefill, generate and train streams of varying length
(generate's decode steps in a lax.fori_loop when compiled, a Python loop op by op; train
is jax.value_and_grad of the weighted loss), the prefill with the length as a Python int
(prefill_int) and the DDPM denoiser on images of varying batch and resolution.
Compiled: jax.jit (a trace and an XLA compile per distinct shape; a new closure per model,
so no jit cache is shared between cases), or jax.export with a symbolic length (traced and
lowered once, on the first request; each new concrete length is then compiled by XLA, which
the compilation counter shows)."""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from frameworks.base import Unsupported
from frameworks.jax.gpt import head, hidden, next_token, python_loop
from workloads import diffusion as DF
from workloads import dynamic as D
from workloads import gpt as G
from workloads.base import Model, error_line
from workloads.case import Case
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only

COMPILED = (None, "export", "bucketed")
WHY = "jit specialises on every shape; jax.export is its symbolic-shape path"


def prefill(p: dict[str, jax.Array], tokens: jax.Array, last: jax.Array, *, cfg: G.GPTConfig) -> jax.Array:
    """Logits (B, vocab) at position last[b] of each row of tokens (B, T)."""
    B, T = tokens.shape
    x, _ = hidden(p, tokens, cfg=cfg)                                        # (B*T, C)
    return head(p, x.reshape(B, T, -1)[jnp.arange(B), last])


def generate(p: dict[str, jax.Array], tokens: jax.Array, last: jax.Array, *, cfg: G.GPTConfig, n_new: int,
             loop: Callable) -> jax.Array:
    """Greedy new tokens (B, n_new) of the (padded) prompts tokens (B, P): frameworks.jax.gpt's
    cached decoding, started at the real last position instead of P - 1. The prefill's keys
    and values of a bucket's padding sit in the caches at positions >= last + 1; each decode
    step writes its own there first and attends only to positions <= its own, so no query
    ever sees the padding."""
    B, P = tokens.shape
    x, kv = hidden(p, tokens, cfg=cfg)                                              # (B*P, C)
    pad = ((0, 0), (0, 0), (0, cfg.block_size - P), (0, 0))
    kv = [(jnp.pad(k.swapaxes(1, 2), pad), jnp.pad(v.swapaxes(1, 2), pad)) for k, v in kv]  # (B, nh, S, hs)
    tok = next_token(p, x.reshape(B, P, -1)[jnp.arange(B), last], tokens.dtype)     # (B,)
    start = last[0] + 1                       # every row has the same length: one position

    def step(j: Any, carry: tuple[jax.Array, jax.Array, Any]) -> tuple[jax.Array, jax.Array, Any]:
        """New token j at position start + j, through the caches -> new token j + 1."""
        out, tok, kv = carry
        x, kv = hidden(p, tok[:, None], cfg=cfg, kv=kv, pos=start + j)
        tok = next_token(p, x, tokens.dtype)
        return lax.dynamic_update_slice_in_dim(out, tok[:, None], j + 1, axis=1), tok, kv

    out = jnp.zeros((B, n_new), tokens.dtype).at[:, 0].set(tok)
    return loop(0, n_new - 1, step, (out, tok, kv))[0]


def train_loss(p: dict[str, jax.Array], tokens: jax.Array, targets: jax.Array, weights: jax.Array, *,
               cfg: G.GPTConfig) -> jax.Array:
    """sum(w * ce) / sum(w) over every token: the padding's weight is 0."""
    x, _ = hidden(p, tokens, cfg=cfg)
    ce = optax.softmax_cross_entropy_with_integer_labels(head(p, x), targets.reshape(-1))
    w = weights.reshape(-1)
    return (ce * w).sum() / w.sum()


class JaxPrefill(Model):
    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        mode, device, strategy = case.mode, case.device, case.strategy
        self.config, self.mode, self.strategy = config, mode, strategy
        self.params = {k: adapter.asarray(params[k], device) for k in G.param_shapes(config.gpt)}
        cfg, loop = config.gpt, lax.fori_loop if mode == "compiled" else python_loop
        self._fns = {"prefill": partial(prefill, cfg=cfg),
                     "generate": partial(generate, cfg=cfg, n_new=config.new_tokens, loop=loop),
                     "train": jax.value_and_grad(partial(train_loss, cfg=cfg))}
        self._jitted = {k: f if mode == "eager" else jax.jit(f) for k, f in self._fns.items()}
        self._exported: dict[str, Any] = {}

    def _export(self, task: str, args: tuple[jax.Array, ...]) -> Any:
        """Trace and lower once for every length: each (B, T) argument as (B, t), t symbolic,
        1 <= t <= block."""
        (t,) = jax.export.symbolic_shape("t", constraints=(f"t <= {self.config.gpt.block_size}",))
        specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), self.params)
        arg_specs = [jax.ShapeDtypeStruct((a.shape[0], t) if a.ndim == 2 else a.shape, a.dtype) for a in args]
        return jax.export.export(jax.jit(self._fns[task]))(specs, *arg_specs)

    def _call(self, task: str, *args: jax.Array) -> Any:
        if self.strategy == "export":
            if task not in self._exported:
                self._exported[task] = self._export(task, args)
            return self._exported[task].call(self.params, *args)
        return self._jitted[task](self.params, *args)

    def prefill(self, tokens: jax.Array, last: jax.Array) -> jax.Array:
        return self._call("prefill", tokens, last)

    def generate(self, tokens: jax.Array, last: jax.Array) -> jax.Array:
        return self._call("generate", tokens, last)

    def train(self, tokens: jax.Array, targets: jax.Array, weights: jax.Array) -> dict[str, jax.Array]:
        loss, grads = self._call("train", tokens, targets, weights)
        return {"loss": loss, **grads}


class JaxDdpm(Model):
    """The ddpm stream: frameworks/jax/diffusion.py's eps under jax.jit (a compile per
    (batch, resolution)), or jax.export with the batch and the image size symbolic ("b" and
    "2*s"-style multiples of the UNet's downsampling factor, so every level halves exactly):
    exported once, on the first request; an export JAX refuses is recorded unsupported with
    JAX's own error."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        mode, device, strategy = case.mode, case.device, case.strategy
        from frameworks.jax.diffusion import eps
        self.config, self.mode, self.strategy = config, mode, strategy
        cfg = config.unet
        self.params = {k: adapter.asarray(params[k], device) for k in DF.param_shapes(cfg)}
        self._eps = partial(eps, cfg=cfg)
        self._fn = self._eps if mode == "eager" else jax.jit(self._eps)
        self._exported = None

    def _export(self, x: jax.Array, t: jax.Array) -> Any:
        """Trace and lower once for every batch and size: x (b, f*s, f*s, C), t (b,), f the
        UNet's downsampling factor."""
        f = 2 ** (len(self.config.unet.ch_mult) - 1)
        b, s = jax.export.symbolic_shape("b, s")
        specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), self.params)
        try:
            return jax.export.export(jax.jit(self._eps))(
                specs, jax.ShapeDtypeStruct((b, f * s, f * s, x.shape[3]), x.dtype),
                jax.ShapeDtypeStruct((b,), t.dtype))
        except Exception as e:  # noqa: BLE001  JAX's refusal, whatever its class, is the finding
            raise Unsupported(f"jax.export cannot trace the UNet with a symbolic batch and image size: "
                              f"{error_line(e)}") from None

    def eps(self, x: jax.Array, t: jax.Array) -> jax.Array:
        if self.strategy == "export":
            if self._exported is None:
                self._exported = self._export(x, t)
            return self._exported.call(self.params, x, t)
        return self._fn(self.params, x, t)


def prefill_int(p: dict[str, jax.Array], tokens: jax.Array, length: int, *, cfg: G.GPTConfig) -> jax.Array:
    """Logits (B, vocab) of the last of the first `length` tokens of each row."""
    t = tokens[:, :length]
    B, T = t.shape
    x, _ = hidden(p, t, cfg=cfg)                                             # (B*T, C)
    return head(p, x.reshape(B, T, -1)[:, -1])


class JaxPrefillInt(Model):
    """prefill_int: the length as a Python int. jax.jit traces every argument as an abstract
    value unless it is named static, and a traced value cannot bound a slice: the default
    (None) is refused with JAX's own error (recorded unsupported); `static` passes
    static_argnums, a compile per length."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        mode, device, strategy = case.mode, case.device, case.strategy
        self.config, self.mode, self.strategy = config, mode, strategy
        self.params = {k: adapter.asarray(params[k], device) for k in G.param_shapes(config.gpt)}
        fn = partial(prefill_int, cfg=config.gpt)
        self._fn = fn if mode == "eager" else jax.jit(fn, static_argnums=(2,) if strategy == "static" else ())

    def prefill_int(self, tokens: jax.Array, length: int) -> jax.Array:
        self.config.check_int_length(tokens.shape[1], length)
        try:
            return self._fn(self.params, tokens, length)
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError, IndexError) as e:
            raise Unsupported(f"jax.jit without static_argnums traces the Python int and refuses it as a slice "
                              f"bound: {error_line(e)}") from None


MODELS = D.Models("jax", JaxPrefill, JaxDdpm, JaxPrefillInt, COMPILED, WHY, (None, "static"),
                  "the length is a Python int: jit takes it as a static argument (static) or traces it (refused)")


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> D.ByTask:
    return D.build(MODELS, adapter, config, params, case)
