"""GPT-2 in PyTorch, as nanoGPT's model.py writes it, behind fwbench's GPTModel interface.

The modules (LayerNorm, CausalSelfAttention, MLP, Block, GPT) carry the GPT-2 checkpoint's
names, so `GPT.named_parameters()` yields exactly the names of workloads/gpt.py. Linear
weights are stored as nn.Linear wants them, (out, in); the numpy params use GPT-2's Conv1D
layout (in, out), so they are transposed once when loaded and once when exported.

Modes: "eager" runs the modules as they are; "compiled" wraps each timed entry point in
torch.compile (Inductor), compiled lazily on first use: the forward, the loss (its backward
through AOTAutograd), and the generation prefill and decode step, each with fullgraph=True.
The optimizer is torch.optim.AdamW; how the compiled train step joins loss, backward and
update is the case's strategy (frameworks.torch.optim.TRAIN_RECIPES; by default the fused AdamW
runs eagerly after the compiled loss, nanoGPT's recipe). Attention is
F.scaled_dot_product_attention, PyTorch's fused kernel.

Precision (workloads/precision.py): the compute dtype is a parameter of the layers
(frameworks/torch/precision.py: COMPUTE, set_compute): every Linear (the tied head included)
and the attention hold `compute`, the dtype of their products' inputs; float32 runs the
modules as nanoGPT writes them, bfloat16 casts each product's inputs and returns float32, and
writes the attention out (float32 scores and softmax) instead of the fused SDPA. Embeddings,
LayerNorm, GELU, the loss, parameters, gradients and AdamW stay float32.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

from frameworks.torch import compile_for
from frameworks.torch import precision as P
from frameworks.torch.optim import Trainer
from frameworks.torch.precision import Linear, attention, set_compute
from workloads import gpt as W
from workloads.base import Model, attn_scale
from workloads.case import Case

# Module-level names the model reads (at build or call time), so that a test can patch one
# framework's copy alone (tests/test_mutations.py) while the numpy reference keeps its own.
from workloads.gpt import LN_EPS, OPTIMIZER, decayed

PRECISIONS = P.PRECISIONS      # the policies build honours: torch's dtype table's (frameworks/torch/precision.py)

# ----------------------------------------------------------------------------- primitives

def gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")                            # GPT-2's GELU


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.size(-1),), w, b, LN_EPS)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of logits (N, vocab) against integer targets (N,)."""
    return F.cross_entropy(logits, targets.long())


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, compute: torch.dtype = P.F32) -> torch.Tensor:
    """softmax(q k^T / sqrt(hs) + causal mask) v; q, k, v (B, nh, T, hs)."""
    return attention(q, k, v, attn_scale(q.size(-1)), compute, causal=True)


class LayerNorm(nn.Module):
    """nn.LayerNorm's parameters (weight, bias) around `layer_norm`."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias)


class CausalSelfAttention(nn.Module):
    compute: torch.dtype = P.F32   # the dtype of the attention's products' inputs (precision.attention)

    def __init__(self, config: W.GPTConfig) -> None:
        super().__init__()
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd)  # q, k, v for all heads
        self.c_proj = Linear(config.n_embd, config.n_embd)      # output projection
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor] | None = None,
                pos: torch.Tensor | None = None) -> torch.Tensor:
        """softmax(q k^T / sqrt(hs) + causal mask) v over the heads, then c_proj.

        With this layer's key/value cache kv = (k_cache, v_cache), each (B, nh, block_size, hs),
        x holds the tokens at positions `pos` (T,) and their keys and values are written there
        first.
        A prefill (pos = 0..T-1) then needs only causal attention within x; a decode step
        (T = 1) attends to every cached position <= pos, masking the rest of the cache, so its
        shapes do not depend on the position.
        """
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if kv is not None:
            kv[0][:, :, pos] = k
            kv[1][:, :, pos] = v
        if kv is not None and T == 1:
            k_all, v_all = kv                                               # (B, nh, L, hs)
            mask = torch.arange(k_all.size(2), device=x.device) <= pos     # (L,) True = attend
            y = attention(q, k_all, v_all, attn_scale(C // self.n_head), self.compute, mask.view(1, 1, 1, -1))
        else:
            y = causal_attention(q, k, v, self.compute)                     # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.c_proj(y)


class MLP(nn.Module):

    def __init__(self, config: W.GPTConfig) -> None:
        super().__init__()
        self.c_fc = Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(gelu(self.c_fc(x)))


class Block(nn.Module):

    def __init__(self, config: W.GPTConfig) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor] | None = None,
                pos: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), kv, pos)  # pre-LayerNorm residual blocks
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):

    def __init__(self, config: W.GPTConfig, precision: str = "fp32") -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        # Weight tying: the output head is the token embedding. named_parameters() lists the
        # shared tensor once, under its first name, wte.weight.
        self.lm_head.weight = self.wte.weight
        set_compute(self, precision)

    def hidden(self, idx: torch.Tensor, pos: torch.Tensor,
               caches: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> torch.Tensor:
        """Final-LayerNorm hidden states (B, T, C) of tokens idx (B, T) at positions pos (T,);
        caches, if given, holds each layer's (k_cache, v_cache), each (B, nh, block_size, hs)."""
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C) + (T, C)
        for i, block in enumerate(self.h):
            x = block(x, None if caches is None else caches[i], pos)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab_size) of tokens idx (B, T)."""
        pos = torch.arange(idx.size(1), device=idx.device)  # (T,)
        return self.lm_head(self.hidden(idx, pos))


def transposed(net: GPT) -> set[str]:
    """GPT-2 names of the weights the module stores transposed: every nn.Linear's (out, in)
    but the tied head's (GPT-2's Conv1D layout is (in, out))."""
    return {f"{n}.weight" for n, m in net.named_modules() if isinstance(m, nn.Linear) and n != "lm_head"}


def load(net: GPT, params: dict[str, np.ndarray]) -> set[str]:
    """Copy workloads.gpt's parameters (GPT-2 names and layout) into net; returns transposed(net)."""
    names = transposed(net)
    own = dict(net.named_parameters())
    assert set(own) == set(params), "module names differ from workloads.gpt's"
    with torch.no_grad():
        for k, p in own.items():
            a = params[k].T if k in names else params[k]
            p.copy_(torch.from_numpy(np.ascontiguousarray(a)))
    return names


# ----------------------------------------------------------------------------- interface

def build(adapter: Any, config: W.GPTConfig, params: dict[str, np.ndarray], case: Case) -> TorchGPT:
    return TorchGPT(adapter, config, params, case)


class TorchGPT(Model):
    """workloads.gpt.GPTModel for PyTorch: a GPT module, its AdamW optimizer, and the entry
    points the benchmarks time (compiled in mode "compiled")."""

    def __init__(self, adapter: Any, config: W.GPTConfig, params: dict[str, np.ndarray], case: Case) -> None:
        W.check_params(config, params)
        mode, device, strategy = case.mode, case.device, case.strategy
        self.config, self.mode, self.device = config, mode, device
        self.precision = case.precision
        self.net = GPT(config, case.precision).to(device)
        self._transposed = load(self.net, params)
        self._params = dict(self.net.named_parameters())

        # nanoGPT's configure_optimizers: weight decay on tensors of 2+ dims only. The train
        # step's recipe in compiled mode is the strategy's (frameworks.torch.optim.TRAIN_RECIPES).
        self.trainer = Trainer(self._params, OPTIMIZER, decayed, self._loss_fn, mode, strategy, device)
        self.optimizer, self.adamw_impl = self.trainer.optimizer, self.trainer.adamw_impl

        # The timed entry points; torch.compile compiles each on its first call, the model's
        # graphs with fullgraph=True (compile_model). Each is its own Python function, so
        # Dynamo caches (and counts) their graphs separately.
        wrap = compile_for(mode, strategy, device)
        self._logits = wrap(self.net)
        self._loss = self.trainer.loss  # forward + loss; its backward through AOTAutograd
        self._prefill = wrap(self._prefill_fn)
        self._decode = wrap(self._decode_fn)

    # -- what is compiled ------------------------------------------------------------
    def _loss_fn(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of next-token targets (B, T)."""
        logits = self.net(idx)  # (B, T, vocab)
        return cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def _prefill_fn(self, idx: torch.Tensor, caches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """Fill the caches with the prompt idx (B, T0); return the next token (B,)."""
        pos = torch.arange(idx.size(1), device=idx.device)  # (T0,)
        x = self.net.hidden(idx, pos, caches)
        return self.net.lm_head(x[:, -1]).argmax(-1).to(idx.dtype)  # head on the last position only

    def _decode_fn(self, idx: torch.Tensor, pos: torch.Tensor,
                   caches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """One token idx (B, 1) at position pos (1,) against the caches; the next token (B,)."""
        x = self.net.hidden(idx, pos, caches)
        return self.net.lm_head(x[:, -1]).argmax(-1).to(idx.dtype)

    # -- GPTModel --------------------------------------------------------------------
    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self._logits(tokens)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self._loss(tokens, targets)

    def grads(self, tokens: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """Gradients keyed and laid out as workloads.gpt's params (Linear weights transposed back)."""
        self.trainer.zero_grad()
        self._loss(tokens, targets).backward()
        return {k: p.grad.t() if k in self._transposed else p.grad for k, p in self._params.items()}

    def train_step(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.trainer.step(tokens, targets)

    def generate(self, prompt: torch.Tensor, n_new: int, use_cache: bool = True) -> torch.Tensor:
        self.config.check_n_new(prompt.shape[1], n_new)
        with torch.no_grad():
            return (self._generate_cached if use_cache else self._generate_full)(prompt, n_new)

    def _generate_full(self, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
        """The reference: the full forward pass over a buffer padded to block_size, so the
        shape never changes; causal attention keeps the padding out of real positions."""
        B, T0 = prompt.shape
        buf = torch.zeros((B, self.config.block_size), dtype=prompt.dtype, device=prompt.device)
        buf[:, :T0] = prompt
        for t in range(T0, T0 + n_new):
            buf[:, t] = self._logits(buf)[:, t - 1].argmax(-1).to(buf.dtype)
        return buf[:, :T0 + n_new].contiguous()

    def _generate_cached(self, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
        """Greedy decoding with the static key/value cache: the prefill, then one compiled
        decode step per further token."""
        B, T0 = prompt.shape
        c = self.config
        out = torch.empty((B, T0 + n_new), dtype=prompt.dtype, device=prompt.device)
        out[:, :T0] = prompt
        if n_new == 0:
            return out
        # The static cache, n_layer x (keys, values) x (B, nh, block_size, hs): one tensor per
        # layer and kind rather than one (n_layer, B, nh, block_size, hs) tensor, because
        # Inductor writes a step's keys into a whole input tensor in place but copies the full
        # base tensor when the write goes through a view of it (a per-layer slice).
        shape = (B, c.n_head, c.block_size, c.head_size)
        caches = [(torch.zeros(shape, device=prompt.device), torch.zeros(shape, device=prompt.device))
                  for _ in range(c.n_layer)]
        nxt = self._prefill(prompt, caches)  # (B,)
        out[:, T0] = nxt
        # The position is a tensor, so the compiled decode step has one static shape for
        # every position and compiles once.
        pos = torch.full((1,), T0, dtype=torch.long, device=prompt.device)
        for t in range(T0 + 1, T0 + n_new):
            nxt = self._decode(nxt[:, None], pos, caches)
            out[:, t] = nxt
            pos = pos + 1
        return out

    def export_params(self) -> dict[str, np.ndarray]:
        out = {}
        for k, p in self._params.items():
            a = p.detach().cpu().numpy()
            out[k] = (a.T if k in self._transposed else a).copy()  # a copy: training goes on in place
        return out
