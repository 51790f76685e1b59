"""workloads.dynamic in PyTorch: the GPT prefill of a stream of prompts of varying length,
under each of torch.compile's ways with a varying dimension (workloads/dynamic.py lists
them). Every case compiles from empty Dynamo caches (torch._dynamo.reset() when the model is
built), so the stream's first requests pay what a fresh process pays, and an earlier case's
graphs do not count towards this one's recompile limit. torch.compile without fullgraph: at
the recompile limit Dynamo runs the function eagerly, which is what the case measures."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

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
        self._fn = self._prefill_fn
        if mode == "compiled":
            torch._dynamo.reset()
            self._fn = torch.compile(self._prefill_fn, dynamic=DYNAMIC[strategy])

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


def build(adapter: Any, config: D.DynamicConfig, params: dict[str, np.ndarray], mode: str, device: str,
          strategy: str | None = None) -> TorchPrefill:
    return TorchPrefill(config, params, mode, device, strategy)
