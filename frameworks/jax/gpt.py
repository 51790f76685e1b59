"""GPT-2 in JAX: pure functions of a parameter pytree, behind fwbench's GPTModel interface.

The parameters are a flat dict keyed by the GPT-2 checkpoint names of workloads/gpt.py (a
dict is a pytree), each a float32 jax.Array in GPT-2's Conv1D layout (in, out), which is
what `x @ W + b` wants. So loading is one device_put per array, gradients come out under
the checkpoint names, and exporting copies the arrays back bit for bit.

The model is pure functions, `logits(params, tokens)` and `loss(params, tokens, targets)`;
gradients are `jax.value_and_grad(loss)`; AdamW with gradient clipping is optax. Attention
is jax.nn.dot_product_attention, JAX's fused-attention entry point (layout (B, T, nh, hs),
so heads need no transposes).

The residual stream is kept flat, one row per token: x is (B*T, C), as in the TensorFlow
model, so every linear layer is a 2-D dot and every weight gradient contracts over one
axis of rows. With (B, T, C) activations, XLA:CPU (jaxlib 0.10) contracted the weight
gradients over two axes and first copied each activation into a transposed layout, fused
with a recomputation of the LayerNorm backward: about 40 ms of copies per small-preset
step. Flat rows removed them (value_and_grad at small, 2 threads: about 15% faster).

Precision (workloads/precision.py): `compute`, the dtype of the products' inputs, is a static
argument of every model function, float32 by default (the path above, unchanged), chosen
once in JaxGPT from JAX's dtype table (frameworks/jax/precision.py: COMPUTE). Every product
(`linear`, `head` and the attention's q k^T and p v) goes through that module's `matmul` and
`attention`; at bf16 the parameters, gradients and optax state stay float32 and bf16 enters
only at the products' inputs, forward and backward, their results float32 (the attention
written out, or cuDNN's flash kernel on a CUDA GPU: its softmax float32 either way).
Embeddings, LayerNorm, GELU, the residual adds and the loss are float32 in both.

Modes: "eager" calls the functions as they are, so JAX dispatches every operation (and
every operation of the backward pass and the optimizer update) one at a time; nothing is
wrapped in jax.jit here. "compiled" wraps each entry point in jax.jit: the forward, the
loss, the gradient, the whole training step (gradient, clipping and AdamW in one program
that donates the old parameters and optimizer state), and the whole generation loop
(lax.fori_loop over a buffer padded to block_size, so every shape is static).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from frameworks.jax import precision as P
from frameworks.jax.optim import adamw
from frameworks.jax.precision import F32, attention, matmul, written_attention
from workloads import gpt as W
from workloads.base import Model, attn_scale
from workloads.case import Case

# Module-level names the model reads at trace (or eager call) time, so that a test can patch
# this framework's copy alone (tests/test_mutations.py).
from workloads.gpt import LN_EPS, OPTIMIZER, decayed

Params = dict[str, jax.Array]
PRECISIONS = P.PRECISIONS  # the policies build honours: JAX's dtype table's (frameworks/jax/precision.py)
KV = list[tuple[jax.Array, jax.Array]]  # per layer: key and value caches, each (B, nh, S, hs)


# ----------------------------------------------------------------------------- how the layers are written

@dataclass(frozen=True)
class Forms:
    """How one program's layers are written: a static argument of the model functions, as
    `compute` is. The maths is the same in every form (the equivalence tests check each entry
    point against the numpy reference and finite differences); what differs is the program XLA
    gets, chosen per backend and kind of program by measurement (docs/measurements/peers-cpu-2core:
    the train step against Hugging Face's Flax GPT-2 on the same weights).

      canonical_grad  linear layers and the head through precision.rows_gemm: each weight
                      gradient one canonical GEMM (XLA:CPU runs the transposed-A form its own
                      transpose gives at 122-170 GFLOP/s against 190-210)
      norm_vjp        LayerNorm's backward written out (layer_norm_vjp): one fusion of two row
                      means; JAX's own derivative let XLA re-add the residual stream's gradients
                      of every later layer inside each LayerNorm's backward fusion
      attention       "xla": jax.nn.dot_product_attention; "written": softmax(q k^T) v as two
                      einsums (precision.written_attention), whose backward reads the saved
                      probabilities (XLA's fused attention recomputes them)

    The first two are custom VJPs: reverse mode only, so programs that JAX may also
    differentiate forward (the derivatives workload's HVPs and Hessians) keep PLAIN."""
    canonical_grad: bool = False
    norm_vjp: bool = False
    attention: str = "xla"


PLAIN = Forms()
# Measured on the 2-core AMD EPYC (jaxlib 0.10.2, small preset, train step against HF Flax in
# interleaved rounds, median ratio [95% bootstrap]): PLAIN 1.111 [1.096, 1.125]; canonical
# weight gradients 1.051 [1.032, 1.063]; + written LayerNorm backward 1.042 [1.013, 1.063];
# + written attention 0.999 [0.989, 1.017]. A forward-only program keeps XLA's fused attention
# (16% faster than the written form's forward per layer at this shape). GPUs keep PLAIN: none of
# this was measured there (cuBLAS takes either operand transposed).
GRADIENT_CPU = Forms(canonical_grad=True, norm_vjp=True, attention="written")


def forms_for(platform: str, gradient: bool) -> Forms:
    """The forms of a program on `platform` ('cpu', 'gpu', ...): GRADIENT_CPU for a program that
    takes a gradient on the CPU, PLAIN otherwise."""
    return GRADIENT_CPU if gradient and platform == "cpu" else PLAIN


def attention_name(forms: Forms) -> str:
    """The record's words for the float32 attention a form runs (attention_impl)."""
    return P.XLA_ATTENTION if forms.attention == "xla" else f"{P.WRITTEN} (float32 einsums)"


# ----------------------------------------------------------------------------- the model

def layer_norm(x: jax.Array, w: jax.Array, b: jax.Array, forms: Forms = PLAIN) -> jax.Array:
    """(x - mean) / sqrt(var + eps) * w + b over the channels (biased variance, as GPT-2)."""
    if forms.norm_vjp:
        return layer_norm_vjp(x, w, b)
    mu = x.mean(-1, keepdims=True)
    var = jnp.square(x - mu).mean(-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + LN_EPS) * w + b


@jax.custom_vjp
def layer_norm_vjp(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    """layer_norm of rows x (N, C), its backward written out (Forms.norm_vjp)."""
    return _layer_norm_fwd(x, w, b)[0]


def _layer_norm_fwd(x: jax.Array, w: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    xc = x - x.mean(-1, keepdims=True)
    rstd = lax.rsqrt(jnp.square(xc).mean(-1, keepdims=True) + LN_EPS)
    xhat = xc * rstd
    return xhat * w + b, (xhat, rstd, w)


def _layer_norm_bwd(res: tuple[jax.Array, ...], g: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """With xhat = (x - mean) rstd and gw = g w: dx = rstd (gw - mean(gw) - xhat mean(gw xhat))
    over the channels; dw = sum over rows of g xhat, db = sum of g."""
    xhat, rstd, w = res
    gw = g * w
    dx = rstd * (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True))
    return dx, (g * xhat).sum(0), g.sum(0)


layer_norm_vjp.defvjp(_layer_norm_fwd, _layer_norm_bwd)


def gelu(x: jax.Array) -> jax.Array:
    return jax.nn.gelu(x, approximate=True)                               # GPT-2's GELU, tanh form


def cross_entropy(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean cross-entropy of logits (N, vocab) against integer targets (N,)."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, compute: Any = F32, forms: Forms = PLAIN
                     ) -> jax.Array:
    """softmax(q k^T / sqrt(hs) + causal mask) v; q, k, v (B, T, nh, hs) (JAX's layout)."""
    if compute == F32 and forms.attention == "written":
        T = q.shape[1]
        return written_attention(q, k, v, attn_scale(q.shape[-1]), F32, jnp.tril(jnp.ones((T, T), bool)))
    return attention(q, k, v, attn_scale(q.shape[-1]), compute, causal=True)


def linear(p: Params, name: str, x: jax.Array, compute: Any = F32, forms: Forms = PLAIN) -> jax.Array:
    """GPT-2's Conv1D: x @ W + b with W stored (in, out)."""
    return matmul(x, p[name + ".weight"], compute, canonical_grad=forms.canonical_grad) + p[name + ".bias"]


def causal_self_attention(p: Params, h: str, x: jax.Array, B: int, T: int, n_head: int,
                          kv: tuple[jax.Array, jax.Array] | None = None, pos: Any = 0,
                          compute: Any = F32, forms: Forms = PLAIN) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """softmax(q k^T / sqrt(hs) + causal mask) v over the heads, then c_proj.

    x is (B*T, C), the rows of B sequences of T tokens. Without a cache, each sequence
    attends causally to itself. With a cache kv = (k_cache, v_cache), each (B, nh,
    block_size, hs), T is 1, the token at position `pos`: its key and value are written
    there and it attends to every position <= pos, the rest of the cache masked, so no
    shape depends on pos. Returns the output (B*T, C) and the updated caches, or without a
    cache the sequences' own keys and values (B, T, nh, hs), for a prefill to store.
    """
    C = x.shape[-1]
    q, k, v = jnp.split(linear(p, h + "attn.c_attn", x, compute, forms), 3, axis=-1)  # (B*T, C) each
    q, k, v = (t.reshape(B, T, n_head, C // n_head) for t in (q, k, v))   # (B, T, nh, hs)
    if kv is None:
        y = causal_attention(q, k, v, compute, forms)                    # (B, T, nh, hs)
    else:
        # The caches are kept (B, nh, S, hs), the layout of the q k^T and att v products,
        # so the swapaxes below cancel against the attention's own transposes instead of
        # copying the whole cache on every step.
        k = lax.dynamic_update_slice_in_dim(kv[0], k.swapaxes(1, 2), pos, axis=2)  # (B, nh, S, hs)
        v = lax.dynamic_update_slice_in_dim(kv[1], v.swapaxes(1, 2), pos, axis=2)
        y = attention(q, k, v, attn_scale(C // n_head), compute, pos=pos)  # (B, 1, nh, hs)
    y = y.reshape(B * T, C)  # re-assemble all head outputs side by side
    return linear(p, h + "attn.c_proj", y, compute, forms), (k, v)


def mlp(p: Params, h: str, x: jax.Array, compute: Any = F32, forms: Forms = PLAIN) -> jax.Array:
    return linear(p, h + "mlp.c_proj", gelu(linear(p, h + "mlp.c_fc", x, compute, forms)), compute, forms)


def hidden(p: Params, tokens: jax.Array, *, cfg: W.GPTConfig, kv: KV | None = None, pos: Any = 0,
           compute: Any = F32, forms: Forms = PLAIN) -> tuple[jax.Array, KV]:
    """Final-LayerNorm hidden states (B*T, C) of tokens (B, T) at positions pos..pos+T-1,
    one row per token, and every layer's keys and values (see causal_self_attention)."""
    B, T = tokens.shape
    x = p["wte.weight"][tokens] + lax.dynamic_slice_in_dim(p["wpe.weight"], pos, T)  # (B, T, C)
    x = x.reshape(B * T, cfg.n_embd)                                                 # (B*T, C)
    new_kv = []
    for i in range(cfg.n_layer):  # unrolled: n_layer is small and XLA fuses across layers
        h = f"h.{i}."
        y, kv_i = causal_self_attention(p, h, layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], forms),
                                        B, T, cfg.n_head, None if kv is None else kv[i], pos, compute, forms)
        x = x + y  # pre-LayerNorm residual blocks
        x = x + mlp(p, h, layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], forms), compute, forms)
        new_kv.append(kv_i)
    return layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], forms), new_kv


def head(p: Params, x: jax.Array, compute: Any = F32, forms: Forms = PLAIN) -> jax.Array:
    """Hidden rows (N, C) -> logits (N, vocab_size): the output head is the token embedding
    (tied)."""
    return matmul(x, p["wte.weight"], compute, transpose_b=True, canonical_grad=forms.canonical_grad)


def logits(p: Params, tokens: jax.Array, *, cfg: W.GPTConfig, compute: Any = F32, forms: Forms = PLAIN
           ) -> jax.Array:
    """(B, T) int32 -> (B, T, vocab_size)."""
    x, _ = hidden(p, tokens, cfg=cfg, compute=compute, forms=forms)
    return head(p, x, compute, forms).reshape(*tokens.shape, cfg.vocab_size)


def loss(p: Params, tokens: jax.Array, targets: jax.Array, *, cfg: W.GPTConfig,
         compute: Any = F32, forms: Forms = PLAIN) -> jax.Array:
    """Mean next-token cross-entropy."""
    x, _ = hidden(p, tokens, cfg=cfg, compute=compute, forms=forms)
    return cross_entropy(head(p, x, compute, forms), targets.reshape(-1))


# ----------------------------------------------------------------------------- training

def train_step(p: Params, opt_state: Any, tokens: jax.Array, targets: jax.Array, *,
               cfg: W.GPTConfig, tx: optax.GradientTransformation, compute: Any = F32, forms: Forms = PLAIN
               ) -> tuple[Params, Any, jax.Array]:
    """One optimizer step; returns the new parameters and state, and the loss before the step."""
    loss_value, grads = jax.value_and_grad(loss)(p, tokens, targets, cfg=cfg, compute=compute, forms=forms)
    updates, opt_state = tx.update(grads, opt_state, p)
    return optax.apply_updates(p, updates), opt_state, loss_value


# ----------------------------------------------------------------------------- generation

def python_loop(lower: int, upper: int, body: Callable[[int, Any], Any], carry: Any) -> Any:
    """lax.fori_loop's meaning as a Python loop, for eager mode: each step's operations are
    dispatched as they come (lax.fori_loop outside jit would compile the whole loop)."""
    for i in range(lower, upper):
        carry = body(i, carry)
    return carry


def next_token(p: Params, x: jax.Array, dtype: Any, compute: Any = F32) -> jax.Array:
    """Greedy choice from hidden states x (B, C): the head on one position only."""
    return jnp.argmax(head(p, x, compute), axis=-1).astype(dtype)  # (B,)


def generate_cached(p: Params, prompt: jax.Array, *, n_new: int, cfg: W.GPTConfig,
                    loop: Callable, compute: Any = F32) -> jax.Array:
    """Greedy decoding with a key/value cache: a forward pass over the prompt (B, T0) fills
    the caches and yields the first new token; each further token is one decode step."""
    B, T0 = prompt.shape
    S = cfg.block_size
    buf = jnp.zeros((B, S), prompt.dtype).at[:, :T0].set(prompt)  # (B, S): padded, static shape
    x, kv = hidden(p, prompt, cfg=cfg, compute=compute)        # prefill: (B*T0, C)
    pad = ((0, 0), (0, 0), (0, S - T0), (0, 0))
    kv = [(jnp.pad(k.swapaxes(1, 2), pad), jnp.pad(v.swapaxes(1, 2), pad))  # (B, nh, S, hs) each
          for k, v in kv]
    buf = buf.at[:, T0].set(next_token(p, x.reshape(B, T0, -1)[:, -1], buf.dtype, compute))

    def step(t: Any, carry: tuple[jax.Array, KV]) -> tuple[jax.Array, KV]:
        """The token at position t, through the caches -> the token at t + 1."""
        buf, kv = carry
        x, kv = hidden(p, lax.dynamic_slice_in_dim(buf, t, 1, axis=1), cfg=cfg, kv=kv, pos=t,
                       compute=compute)
        nxt = next_token(p, x, buf.dtype, compute)                   # x: (B*1, C)
        return lax.dynamic_update_slice_in_dim(buf, nxt[:, None], t + 1, axis=1), kv

    buf, _ = loop(T0, T0 + n_new - 1, step, (buf, kv))
    return buf[:, :T0 + n_new]


def generate_full(p: Params, prompt: jax.Array, *, n_new: int, cfg: W.GPTConfig,
                  loop: Callable, compute: Any = F32) -> jax.Array:
    """The reference: every token from the full forward pass over the buffer padded to
    block_size (causal attention keeps the padding out of the real positions)."""
    B, T0 = prompt.shape
    buf = jnp.zeros((B, cfg.block_size), prompt.dtype).at[:, :T0].set(prompt)

    def step(t: Any, buf: jax.Array) -> jax.Array:
        """Tokens up to position t -> the token at t + 1."""
        x, _ = hidden(p, buf, cfg=cfg, compute=compute)            # (B*S, C)
        x = x.reshape(B, cfg.block_size, -1)                           # (B, S, C)
        nxt = next_token(p, lax.dynamic_index_in_dim(x, t, axis=1, keepdims=False), buf.dtype, compute)
        return lax.dynamic_update_slice_in_dim(buf, nxt[:, None], t + 1, axis=1)

    return loop(T0 - 1, T0 + n_new - 1, step, buf)[:, :T0 + n_new]


# ----------------------------------------------------------------------------- interface

def build(adapter: Any, config: W.GPTConfig, params: dict[str, np.ndarray], case: Case) -> JaxGPT:
    return JaxGPT(adapter, config, params, case)


class JaxGPT(Model):
    """workloads.gpt.GPTModel for JAX: the parameters and optimizer state (replaced by
    every train_step) and the entry points the benchmarks time."""

    def __init__(self, adapter: Any, config: W.GPTConfig, params: dict[str, np.ndarray], case: Case) -> None:
        W.check_params(config, params)
        mode, device, compute = case.mode, case.device, P.COMPUTE[case.precision]
        self.config, self.mode, self.device, self.precision = config, mode, device, case.precision
        self.params = {k: adapter.asarray(params[k], device) for k in W.param_shapes(config)}
        self.tx = adamw(params, OPTIMIZER, decayed)
        # optax creates its zeros on the default device: put the state beside the params.
        self.opt_state = jax.device_put(self.tx.init(self.params), adapter.jax_device(device))

        compiled = mode == "compiled"
        jit = jax.jit if compiled else (lambda f, **kw: f)
        loop = lax.fori_loop if compiled else python_loop
        # The gradient programs' layers in the forms measured fastest on this backend (Forms).
        grad_forms = forms_for(adapter.jax_device(device).platform, gradient=True)
        self.attention_impls = {m: attention_name(grad_forms) for m in ("grads", "train_step")} \
            if compute == F32 else {}
        self._logits = jit(partial(logits, cfg=config, compute=compute))
        self._loss = jit(partial(loss, cfg=config, compute=compute))
        # the loss the gradient programs differentiate (params, tokens, targets), declared for
        # the data-parallel steps that differentiate it themselves (frameworks/jax/parallel.py)
        self.train_loss = partial(loss, cfg=config, compute=compute, forms=grad_forms)
        self._grads = jit(jax.grad(self.train_loss))
        # Donation lets XLA write the new parameters and moments into the old buffers.
        # the pure step (params, opt_state, tokens, targets -> params, opt_state, loss), declared
        # for the data-parallel steps that place it (frameworks/jax/parallel.py)
        self.pure_step = partial(train_step, cfg=config, tx=self.tx, compute=compute, forms=grad_forms)
        self._train_step = jit(self.pure_step, donate_argnums=(0, 1))
        self._generate_cached = jit(partial(generate_cached, cfg=config, loop=loop, compute=compute),
                             static_argnames="n_new")
        self._generate_full = jit(partial(generate_full, cfg=config, loop=loop, compute=compute),
                                  static_argnames="n_new")

    def logits(self, tokens: jax.Array) -> jax.Array:
        return self._logits(self.params, tokens)

    def loss(self, tokens: jax.Array, targets: jax.Array) -> jax.Array:
        return self._loss(self.params, tokens, targets)

    def grads(self, tokens: jax.Array, targets: jax.Array) -> dict[str, jax.Array]:
        return self._grads(self.params, tokens, targets)

    def state(self) -> Any:
        """What train_step replaces: the harness waits for these too, since JAX dispatches
        asynchronously and the loss can be ready before the update is."""
        return self.params, self.opt_state

    def train_step(self, tokens: jax.Array, targets: jax.Array) -> jax.Array:
        self.params, self.opt_state, loss_value = self._train_step(self.params, self.opt_state, tokens, targets)
        return loss_value  # a jax.Array: reading its value would wait for the step

    def generate(self, prompt: jax.Array, n_new: int, use_cache: bool = True) -> jax.Array:
        self.config.check_n_new(prompt.shape[1], n_new)
        if n_new == 0:
            return prompt
        fn = self._generate_cached if use_cache else self._generate_full
        return fn(self.params, prompt, n_new=int(n_new))

    def export_params(self) -> dict[str, np.ndarray]:
        # Copies: the next train_step donates these buffers to XLA.
        return {k: np.array(self.params[k]) for k in W.param_shapes(self.config)}
