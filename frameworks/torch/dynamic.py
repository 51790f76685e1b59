"""workloads.dynamic in PyTorch: the GPT prefill, generate and train streams of varying length
(prefill also with the length as a Python int: prefill_int) and the DDPM denoiser on images
of varying batch and resolution, under each of torch.compile's ways with a varying dimension
(workloads/dynamic.py lists them). Prefill, the generate prefill, the decode step and the
training loss are each their own compiled function (the loss's backward through
AOTAutograd). Every case compiles from empty Dynamo caches (the harness's case_caches resets
Dynamo before the model is built; building resets nothing), so the stream's first requests pay
what a fresh process pays, and an earlier case's graphs do not count towards this one's
recompile limit. torch.compile without
fullgraph: at the recompile limit Dynamo runs the function eagerly, which is what the case
measures."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from frameworks.torch.gpt import TorchGPT
from workloads import dynamic as D
from workloads.base import Model
from workloads.case import Case
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only

# strategy -> torch.compile's `dynamic` argument (None: automatic dynamic, the default)
DYNAMIC = {None: None, "static": False, "dynamic": True, "mark_dynamic": None, "bucketed": False}
WHY = "input signatures and exported symbolic shapes are TensorFlow's and JAX's"


def compiled(fn: Any, mode: str, strategy: str | None) -> Any:
    """fn under torch.compile with the strategy's `dynamic` in compiled mode; fn elsewhere. The
    harness starts each case from empty Dynamo caches (TorchAdapter.case_caches), so an earlier
    case's graphs count towards no recompile limit here."""
    if mode != "compiled":
        return fn
    return torch.compile(fn, dynamic=DYNAMIC[strategy])


class TorchPrefill(Model):
    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        mode, strategy = case.mode, case.strategy
        self.config, self.mode, self.strategy = config, mode, strategy
        self.gpt = TorchGPT(adapter, config.gpt, params, case.but(mode="eager", strategy=None))
        self.mark = strategy == "mark_dynamic"
        # each its own compiled function, so Dynamo caches (and counts) them apart
        self._fn, self._gen_prefill, self._decode, self._train_loss = (
            compiled(f, mode, strategy)
            for f in (self._prefill_fn, self._generate_prefill_fn, self.gpt._decode_fn, self._train_loss_fn))

    def _prefill_fn(self, idx: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        net = self.gpt.net
        x = net.hidden(idx, torch.arange(idx.size(1), device=idx.device))            # (B, T, C)
        x = x[torch.arange(idx.size(0), device=idx.device), last.long()]            # (B, C)
        return net.lm_head(x)

    def prefill(self, tokens: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
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
        if self.mark:
            for t in (tokens, targets, weights):
                torch._dynamo.mark_dynamic(t, 1)
        params = self.gpt._params
        loss = self._train_loss(tokens, targets, weights)
        grads = torch.autograd.grad(loss, list(params.values()))
        return {"loss": loss.detach(), **{k: g.t() if k in self.gpt._transposed else g
                                          for k, g in zip(params, grads)}}


class TorchDdpm(Model):
    """The ddpm stream: frameworks/torch/diffusion.py's UNet (eager modules, weights loaded
    there) under torch.compile as the strategy says. mark_dynamic marks the batch (dim 0 of x
    and t) and both image dimensions (1 and 2 of x, NHWC), on every request: Dynamo
    specialises a size of 0 or 1 whatever is marked, so batch 1 gets a graph of its own
    (torch._dynamo.maybe_mark_dynamic, which does not raise for it)."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        from frameworks.torch.diffusion import TorchDiffusion
        mode, strategy = case.mode, case.strategy
        self.config, self.mode, self.strategy = config, mode, strategy
        self.model = TorchDiffusion(adapter, config.unet, params, case.but(mode="eager", strategy=None))
        self.mark = strategy == "mark_dynamic"
        self._fn = compiled(self.model._eps_fn, mode, strategy)

    def eps(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if self.mark:
            for d in (0, 1, 2):
                torch._dynamo.maybe_mark_dynamic(x, d)
            torch._dynamo.maybe_mark_dynamic(t, 0)
        with torch.no_grad():
            return self._fn(x, t)


class TorchPrefillInt(TorchPrefill):
    """prefill_int: the prompt padded to the block size and its length as a Python int,
    sliced inside the compiled function. Dynamo treats an int argument like a size:
    dynamic=False specialises on every value (a graph per length, then eager at the
    recompile limit), the default makes it symbolic after it changes once, dynamic=True
    from the start."""

    def __init__(self, adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> None:
        super().__init__(adapter, config, params, case.but(mode="eager", strategy=None))
        mode, strategy = case.mode, case.strategy
        self.mode, self.strategy = mode, strategy
        self._int = compiled(self._int_fn, mode, strategy)

    def _int_fn(self, idx: torch.Tensor, length: int) -> torch.Tensor:
        net = self.gpt.net
        x = net.hidden(idx[:, :length], torch.arange(length, device=idx.device))       # (B, length, C)
        return net.lm_head(x[:, -1])

    def prefill_int(self, tokens: torch.Tensor, length: int) -> torch.Tensor:
        self.config.check_int_length(tokens.shape[1], length)
        with torch.no_grad():
            return self._int(tokens, length)


MODELS = D.Models("torch", TorchPrefill, TorchDdpm, TorchPrefillInt, tuple(DYNAMIC), WHY,
                  (None, "static", "dynamic"), "the length is a Python int: no tensor dimension varies "
                  "(mark_dynamic), and an input signature is TensorFlow's")


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], case: Case) -> D.ByTask:
    return D.build(MODELS, adapter, config, params, case)
