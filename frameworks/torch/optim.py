"""torch's optimizer and train step: AdamW as nanoGPT builds it and the train step put
together as the case's recipe says (the one home of both; frameworks/torch/gpt.py and
diffusion.py use them)."""
from __future__ import annotations

from typing import Any

import torch

from frameworks.torch import compile_for
from workloads.base import CUDA_GRAPHS, TORCH_DEFAULT_RECIPE, TORCH_TRAIN_RECIPES, Unsupported


def adamw(named: dict[str, "torch.nn.Parameter"], opt: Any, decayed: Any,
          fused: bool = True) -> tuple["torch.optim.AdamW", str]:
    """torch.optim.AdamW as nanoGPT's configure_optimizers builds it: weight decay on the
    parameters `decayed(name, shape)` selects, none on the others; hyperparameters from
    the workload's AdamW. The fused kernel (one pass over all tensors) where this build has
    one for the device (CPU since PyTorch 2.4, CUDA) and `fused` asks for it, else foreach
    (the implementation torch.compile traces and Inductor fuses). Returns it and its kind."""
    decay = [p for k, p in named.items() if decayed(k, tuple(p.shape))]
    no_decay = [p for k, p in named.items() if not decayed(k, tuple(p.shape))]
    groups = [{"params": decay, "weight_decay": opt.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    hyper = dict(lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=opt.eps)
    if fused:
        try:
            return torch.optim.AdamW(groups, fused=True, **hyper), "fused"
        except RuntimeError:
            pass
    return torch.optim.AdamW(groups, foreach=True, **hyper), "foreach"


# How a compiled train step is put together: the `strategy` of torch's compiled train_step
# cases (workloads.base.TORCH_TRAIN_RECIPES names them). JAX and TensorFlow compile forward,
# backward, clipping and AdamW as one program; torch.compile does so only with compiled
# autograd, since Dynamo does not trace Tensor.backward() and torch.optim marks its steps.
TRAIN_RECIPES = {
    "eager-adamw": "torch.compile of the model and loss (backward through AOTAutograd); gradient clipping "
                   "and the fused AdamW kernel run eagerly (nanoGPT's recipe)",
    "compiled-adamw": "torch.compile of the model and loss; clipping + AdamW (foreach) in a second "
                      "torch.compile'd function, fused by Inductor (PyTorch's compiled-optimizer recipe)",
    "compiled-autograd": "loss, backward, clipping and AdamW (foreach) in one torch.compile'd function, the "
                         "backward captured by compiled autograd",
}
# The recipe of `compiled` train_step cases without a strategy, the same in both workloads:
# the fastest that works here (docs/ARCHITECTURE.md has the measurement).
DEFAULT_RECIPE = TORCH_DEFAULT_RECIPE
assert set(TRAIN_RECIPES) == set(TORCH_TRAIN_RECIPES), "workloads.base names the recipes frameworks.torch defines"


class Trainer:
    """The optimizer of a torch model and its train step, put together as `recipe` says
    (eager mode: everything eager). `loss_fn(*inputs)` returns the scalar loss."""

    def __init__(self, named: dict[str, "torch.nn.Parameter"], opt: Any, decayed: Any, loss_fn: Any,
                 mode: str, strategy: str | None, device: str = "cpu") -> None:
        if strategy is not None and (mode != "compiled" or strategy not in (*TRAIN_RECIPES, CUDA_GRAPHS)):
            raise Unsupported(f"torch train_step has no strategy {strategy!r} in mode {mode!r} "
                              f"(compiled mode has {', '.join((*TRAIN_RECIPES, CUDA_GRAPHS))})")
        # cudagraphs: the default recipe with the loss (forward and backward) replayed as CUDA graphs
        self.recipe = (strategy if strategy in TRAIN_RECIPES else DEFAULT_RECIPE) if mode == "compiled" else None
        self._params = list(named.values())
        self.clip_norm = opt.clip_norm
        self.optimizer, self.adamw_impl = adamw(named, opt, decayed, fused=self.recipe in (None, "eager-adamw"))
        self.loss = compile_for(mode, strategy, device)(loss_fn)
        self._loss_fn = loss_fn
        if self.recipe == "compiled-adamw":
            self._update = torch.compile(self._update_fn)
        elif self.recipe == "compiled-autograd":
            self._whole = torch.compile(self._whole_fn)
        else:
            self._update = self._update_fn

    def _update_fn(self) -> None:
        """nanoGPT's update: clip the global gradient norm, then one AdamW step."""
        torch.nn.utils.clip_grad_norm_(self._params, self.clip_norm)
        self.optimizer.step()

    def _whole_fn(self, *inputs: torch.Tensor) -> torch.Tensor:
        loss = self._loss_fn(*inputs)
        loss.backward()
        self._update_fn()
        return loss.detach()

    def zero_grad(self) -> None:
        # set_to_none: backward allocates fresh gradients, so tensors returned by grads()
        # are never overwritten and no zero-fill pass runs.
        self.optimizer.zero_grad(set_to_none=True)

    def step(self, *inputs: torch.Tensor) -> torch.Tensor:
        self.zero_grad()
        if self.recipe == "compiled-autograd":
            with torch._dynamo.config.patch(compiled_autograd=True):
                return self._whole(*inputs)
        loss = self.loss(*inputs)
        loss.backward()
        self._update()
        return loss.detach()  # no .item(): reading the value would sync inside the timed step
