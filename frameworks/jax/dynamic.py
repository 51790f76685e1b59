"""workloads.dynamic in JAX: the GPT prefill of a stream of prompts of varying length (the
length from the shape, or a Python int: prefill_int) and the DDPM denoiser on images of
varying batch and resolution.
Compiled: jax.jit (a trace and an XLA compile per distinct shape; a new closure per model,
so no jit cache is shared between cases), or jax.export with a symbolic length (traced and
lowered once, on the first request; each new concrete length is then compiled by XLA, which
the compilation counter shows)."""
from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from frameworks.base import Unsupported
from frameworks.jax.gpt import head, hidden
from workloads import diffusion as DF
from workloads import dynamic as D
from workloads import gpt as G
from workloads.base import error_line

COMPILED = (None, "export", "bucketed")
WHY = "jit specialises on every shape; jax.export is its symbolic-shape path"


def refuse(mode: str, strategy: str | None, have: tuple[str | None, ...] = COMPILED, why: str = WHY) -> None:
    """Unsupported, with the reason, where JAX has no `strategy` in `mode`."""
    reason = D.lacks("jax", mode, strategy, have, why)
    if reason:
        raise Unsupported(reason)


def prefill(p: dict[str, jax.Array], tokens: jax.Array, last: jax.Array, *, cfg: G.GPTConfig) -> jax.Array:
    """Logits (B, vocab) at position last[b] of each row of tokens (B, T)."""
    B, T = tokens.shape
    x, _ = hidden(p, tokens, cfg=cfg)                                        # (B*T, C)
    return head(p, x.reshape(B, T, -1)[jnp.arange(B), last])


class JaxPrefill:
    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str,
                 device: str, strategy: str | None) -> None:
        refuse(mode, strategy)
        self.config, self.mode, self.strategy = config, mode, strategy
        self.params = {k: adapter.asarray(params[k], device) for k in G.param_shapes(config.gpt)}
        fn = partial(prefill, cfg=config.gpt)
        self._fn = fn if mode == "eager" else jax.jit(fn)
        self._exported = None

    def _export(self, tokens: jax.Array, last: jax.Array) -> Any:
        """Trace and lower once for every length: tokens (B, t) with t symbolic, 1 <= t <= block."""
        B = tokens.shape[0]
        (t,) = jax.export.symbolic_shape("t", constraints=(f"t <= {self.config.gpt.block_size}",))
        specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), self.params)
        return jax.export.export(jax.jit(partial(prefill, cfg=self.config.gpt)))(
            specs, jax.ShapeDtypeStruct((B, t), tokens.dtype), jax.ShapeDtypeStruct(last.shape, last.dtype))

    def prefill(self, tokens: jax.Array, last: jax.Array) -> jax.Array:
        self.config.gpt.check_tokens(tokens)
        if self.strategy == "export":
            if self._exported is None:
                self._exported = self._export(tokens, last)
            return self._exported.call(self.params, tokens, last)
        return self._fn(self.params, tokens, last)


class JaxDdpm:
    """The ddpm stream: frameworks/jax/diffusion.py's eps under jax.jit (a compile per
    (batch, resolution)), or jax.export with the batch and the image size symbolic ("b" and
    "2*s"-style multiples of the UNet's downsampling factor, so every level halves exactly):
    exported once, on the first request; an export JAX refuses is recorded unsupported with
    JAX's own error."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str,
                 device: str, strategy: str | None) -> None:
        refuse(mode, strategy)
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
                specs, jax.ShapeDtypeStruct((b, f * s, f * s, x.shape[3]), x.dtype), jax.ShapeDtypeStruct((b,), t.dtype))
        except Exception as e:  # noqa: BLE001  JAX's refusal, whatever its class, is the finding
            raise Unsupported(f"jax.export cannot trace the UNet with a symbolic batch and image size: "
                              f"{error_line(e)}") from None

    def eps(self, x: jax.Array, t: jax.Array) -> jax.Array:
        self.config.unet_at(x.shape[1]).check_eps_inputs(x, t)
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


class JaxPrefillInt:
    """prefill_int: the length as a Python int. jax.jit traces every argument as an abstract
    value unless it is named static, and a traced value cannot bound a slice: the default
    (None) is refused with JAX's own error (recorded unsupported); `static` passes
    static_argnums, a compile per length."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str,
                 device: str, strategy: str | None) -> None:
        refuse(mode, strategy, (None, "static"), "the length is a Python int: jit takes it as a static argument "
               "(static) or traces it (refused)")
        self.config, self.mode, self.strategy = config, mode, strategy
        self.params = {k: adapter.asarray(params[k], device) for k in G.param_shapes(config.gpt)}
        fn = partial(prefill_int, cfg=config.gpt)
        self._fn = fn if mode == "eager" else jax.jit(fn, static_argnums=(2,) if strategy == "static" else ())

    def prefill_int(self, tokens: jax.Array, length: int) -> jax.Array:
        self.config.gpt.check_tokens(tokens)
        try:
            return self._fn(self.params, tokens, length)
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError, IndexError) as e:
            raise Unsupported(f"jax.jit without static_argnums traces the Python int and refuses it as a slice "
                              f"bound: {error_line(e)}") from None


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str, device: str,
          strategy: str | None = None) -> D.ByTask:
    gpt_params, unet_params = D.split_params(params)
    return D.ByTask(prefill=lambda: JaxPrefill(adapter, config, gpt_params, mode, device, strategy),
                    eps=lambda: JaxDdpm(adapter, config, unet_params, mode, device, strategy),
                    prefill_int=lambda: JaxPrefillInt(adapter, config, gpt_params, mode, device, strategy))
