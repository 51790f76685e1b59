"""workloads.dynamic in JAX: the GPT prefill of a stream of prompts of varying length.
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
from workloads import dynamic as D
from workloads import gpt as G

COMPILED = (None, "export", "bucketed")


def prefill(p: dict[str, jax.Array], tokens: jax.Array, last: jax.Array, *, cfg: G.GPTConfig) -> jax.Array:
    """Logits (B, vocab) at position last[b] of each row of tokens (B, T)."""
    B, T = tokens.shape
    x, _ = hidden(p, tokens, cfg=cfg)                                        # (B*T, C)
    return head(p, x.reshape(B, T, -1)[jnp.arange(B), last])


class JaxPrefill:
    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str,
                 device: str, strategy: str | None) -> None:
        why = D.lacks("jax", mode, strategy, COMPILED, "jit specialises on every shape; jax.export is its "
                      "symbolic-shape path")
        if why:
            raise Unsupported(why)
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


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str, device: str,
          strategy: str | None = None) -> JaxPrefill:
    return JaxPrefill(adapter, config, params, mode, device, strategy)
