"""workloads.dynamic in PyTorch: the GPT prefill, generate and train streams of varying
length, under each of torch.compile's ways with a varying dimension (workloads/dynamic.py
lists them). Prefill, the generate prefill, the decode step and the training loss are each
their own compiled function (the loss's backward through AOTAutograd). Every case compiles
from empty Dynamo caches (torch._dynamo.reset() when the model is built), so the stream's
first requests pay what a fresh process pays, and an earlier case's graphs do not count
towards this one's recompile limit. torch.compile without fullgraph: at
the recompile limit Dynamo runs the function eagerly, which is what the case measures."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from frameworks.base import Unsupported
from frameworks.torch.gpt import TorchGPT
from workloads import dynamic as D

# strategy -> torch.compile's `dynamic` argument (None: automatic dynamic, the default)
DYNAMIC = {None: None, "static": False, "dynamic": True, "mark_dynamic": None, "bucketed": False}


class TorchPrefill:
    def __init__(self, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str, device: str,
                 strategy: str | None) -> None:
        why = D.lacks("torch", mode, strategy, tuple(DYNAMIC), "input signatures and exported symbolic shapes "
                      "are TensorFlow's and JAX's")
        if why:
            raise Unsupported(why)
        self.config, self.mode, self.strategy = config, mode, strategy
        self.gpt = TorchGPT(config.gpt, params, "eager", device)
        self.mark = strategy == "mark_dynamic"
        self._fn, self._gen_prefill, self._decode = self._prefill_fn, self._generate_prefill_fn, self.gpt._decode_fn
        self._train_loss = self._train_loss_fn
        if mode == "compiled":   # each its own function, so Dynamo caches (and counts) them apart
            torch._dynamo.reset()
            self._fn, self._gen_prefill, self._decode, self._train_loss = (
                torch.compile(f, dynamic=DYNAMIC[strategy])
                for f in (self._prefill_fn, self._generate_prefill_fn, self.gpt._decode_fn, self._train_loss_fn))

    def _prefill_fn(self, idx: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        net = self.gpt.net
        x = net.hidden(idx, torch.arange(idx.size(1), device=idx.device))            # (B, T, C)
        x = x[torch.arange(idx.size(0), device=idx.device), last.long()]            # (B, C)
        return net.lm_head(x)

    def prefill(self, tokens: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        self.config.gpt.check_tokens(tokens)
        if self.mark:
            torch._dynamo.mark_dynamic(tokens, 1)
        with torch.no_grad():
            return self._fn(tokens, last)

    # -- generate: prefill at the real last position, then TorchGPT's decode step ------------
    def _generate_prefill_fn(self, idx: torch.Tensor, last: torch.Tensor,
                             caches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """Fill the caches with the (padded) prompts idx (B, P); the next token (B,) from
        position last[b]. A bucket's padding is written to the caches at positions >= last + 1,
        where each decode step overwrites it before any query may attend to it."""
        x = self.gpt.net.hidden(idx, torch.arange(idx.size(1), device=idx.device), caches)  # (B, P, C)
        x = x[torch.arange(idx.size(0), device=idx.device), last.long()]                # (B, C)
        return self.gpt.net.lm_head(x).argmax(-1).to(idx.dtype)

    def generate(self, tokens: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        self.config.gpt.check_tokens(tokens)
        c = self.config.gpt
        if self.mark:
            torch._dynamo.mark_dynamic(tokens, 1)
        # The static cache of TorchGPT's generate, block_size long: its decode step has one
        # shape for every prompt length and position, so it compiles once; only the prefill varies.
        shape = (tokens.size(0), c.n_head, c.block_size, c.head_size)
        caches = [(torch.zeros(shape, device=tokens.device), torch.zeros(shape, device=tokens.device))
                  for _ in range(c.n_layer)]
        with torch.no_grad():
            out = [self._gen_prefill(tokens, last, caches)]
            pos = last[:1].long() + 1        # every row has the same length: one position tensor
            for _ in range(self.config.new_tokens - 1):
                out.append(self._decode(out[-1][:, None], pos, caches))
                pos = pos + 1
        return torch.stack(out, dim=1)

    # -- train: loss and gradients, padded targets weighted out ---------------------------------
    def _train_loss_fn(self, idx: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """sum(w * ce) / sum(w) over every token: the padding's weight is 0."""
        logits = self.gpt.net(idx)                                                      # (B, T, vocab)
        ce = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1).long(), reduction="none")
        w = weights.view(-1)
        return (ce * w).sum() / w.sum()

    def train(self, tokens: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> dict[str, torch.Tensor]:
        self.config.gpt.check_batch(tokens, targets)
        if self.mark:
            for t in (tokens, targets, weights):
                torch._dynamo.mark_dynamic(t, 1)
        params = self.gpt._params
        loss = self._train_loss(tokens, targets, weights)
        grads = torch.autograd.grad(loss, list(params.values()))
        return {"loss": loss.detach(), **{k: g.t() if k in self.gpt._transposed else g
                                          for k, g in zip(params, grads)}}


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str, device: str,
          strategy: str | None = None) -> TorchPrefill:
    return TorchPrefill(config, params, mode, device, strategy)
