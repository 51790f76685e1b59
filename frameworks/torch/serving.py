"""Serving PyTorch's GPT and DDPM UNet (workloads/serving.py): the functions a service runs,
made of frameworks/torch/gpt.py's and diffusion.py's modules, and their deployable forms.

    Prefill   tokens (B, T) int32 -> next token (B,) int32, its logits (B, vocab), then each
              layer's key and value caches (B, nh, block_size, hs), zeros past T
    Decode    token (B,) int32, position (1,) int64 (torch's index dtype, as the model's own
              generate passes it), the caches -> the same; the caches are written in place, as
              the model's own decode step does, and returned
    Step      x (B, H, W, C), t (B,) int32, a, b (1,) float32 -> a x + b eps(x, t) (NHWC)

Paths (workloads.serving.PATHS): eager and torch.compile (the development path: dev_engine,
in the serving process); "aoti": each function torch.export'ed with the batch (and the prompt
length) dynamic, then packaged by AOTInductor (a .pt2 each); "onnx": torch.onnx.export with
the dynamo exporter and the same dynamic dimensions, served by ONNX Runtime.
"""
from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn as nn

from frameworks.servables import PRECISIONS, Servable, check_onnx, refused  # noqa: F401  (PRECISIONS: Adapter.build reads it)
from frameworks.serve import Engine
from frameworks.torch import compile_model
from frameworks.torch.diffusion import TorchDiffusion, to_nchw, to_nhwc
from frameworks.torch.gpt import TorchGPT
from workloads import diffusion as D
from workloads import gpt as G
from workloads.case import Case


class Prefill(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        B, T = tokens.shape
        c = self.net.config
        shape = (B, c.n_head, c.block_size, c.head_size)
        caches = [(tokens.new_zeros(shape, dtype=torch.float32), tokens.new_zeros(shape, dtype=torch.float32))
                  for _ in range(c.n_layer)]
        x = self.net.hidden(tokens, torch.arange(T, device=tokens.device), caches)
        logits = self.net.lm_head(x[:, -1])                               # the head on the last position
        return (logits.argmax(-1).to(tokens.dtype), logits, *(t for kv in caches for t in kv))


class Decode(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, token: torch.Tensor, pos: torch.Tensor, *caches: torch.Tensor) -> tuple[torch.Tensor, ...]:
        kv = [(caches[i], caches[i + 1]) for i in range(0, len(caches), 2)]
        x = self.net.hidden(token[:, None], pos, kv)                       # writes the caches at pos
        logits = self.net.lm_head(x[:, -1])
        return (logits.argmax(-1).to(token.dtype), logits, *caches)


class Step(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor, t: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x = to_nchw(x)
        return to_nhwc(a * x + b * self.net(x, t))


def functions(adapter: Any, model_preset: str, params: dict[str, Any], task: str) -> dict[str, nn.Module]:
    """The task's servable functions, eager, on the model built from its weights."""
    case = Case("torch", "serving", task, "eager")
    if task == "generate":
        net = TorchGPT(adapter, G.preset(model_preset).config, params, case).net.eval()
        return {"prefill": Prefill(net).eval(), "decode": Decode(net).eval()}
    net = TorchDiffusion(adapter, D.preset(model_preset).config, params, case).net.eval()
    return {"step": Step(net).eval()}


def dev_engine(adapter: Any, model_preset: str, params: dict[str, Any], task: str, mode: str) -> Engine:
    """The development path: the functions eager, or each under torch.compile (fullgraph)."""
    fns = functions(adapter, model_preset, params, task)
    if mode == "compiled":
        fns = {k: compile_model(f) for k, f in fns.items()}
    return Engine(fns, lambda x: adapter.asarray(x, "cpu"), adapter.to_numpy, torch.no_grad)


def examples(fns: dict[str, nn.Module], task: str, config: Any) -> dict[str, tuple[tuple[Any, ...], Any]]:
    """Each function's example arguments and dynamic dimensions (torch.export's Dim): the batch
    everywhere, the prompt's length for the prefill (up to block_size)."""
    batch = torch.export.Dim("batch", min=1, max=1024)
    if task == "generate":
        g = config.gpt
        length = torch.export.Dim("length", min=1, max=g.block_size)
        tokens = torch.zeros((2, 5), dtype=torch.int32)
        with torch.no_grad():
            out = fns["prefill"](tokens)
        caches = tuple(out[2:])
        return {"prefill": ((tokens,), ({0: batch, 1: length},)),
                "decode": ((out[0], torch.tensor([5], dtype=torch.long), *caches),
                           ({0: batch}, None, tuple({0: batch} for _ in caches)))}
    d = config.diffusion
    x = torch.zeros((2, d.image_size, d.image_size, d.in_channels))
    return {"step": ((x, torch.tensor([3, 4], dtype=torch.int32), torch.ones(1), torch.ones(1)),
                     ({0: batch}, {0: batch}, None, None))}


def dims(task: str) -> str:
    return "batch, prompt length (prefill); batch (decode)" if task == "generate" else "batch"


class TorchServable(Servable):
    FRAMEWORK = "torch"
    EXPORTS = {"aoti": "aoti", "onnx": "onnx"}
    SETTINGS = {"position_dtype": "int64"}

    def _functions(self) -> tuple[dict[str, nn.Module], dict[str, tuple[tuple[Any, ...], Any]]]:
        fns = functions(self.adapter, self.model_preset, self.params, self.task)
        return fns, examples(fns, self.task, self.config)

    def aoti(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        fns, ex = self._functions()
        files = {}
        for name, fn in fns.items():
            args, shapes = ex[name]
            with refused("torch.export"):
                ep = torch.export.export(fn, args, dynamic_shapes=shapes)
            with refused("AOTInductor (aoti_compile_and_package)"):
                files[name] = torch._inductor.aoti_compile_and_package(
                    ep, package_path=os.path.join(folder, f"{name}.pt2"))
        return ({"engine": "aoti", "files": files},
                {"exporter": f"torch.export + AOTInductor (torch {torch.__version__})",
                 "dynamic_dims": dims(self.task)})

    def onnx(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        import onnxscript
        fns, ex = self._functions()
        files = {}
        for name, fn in fns.items():
            args, shapes = ex[name]
            files[name] = os.path.join(folder, f"{name}.onnx")
            with refused("torch.onnx.export(dynamo=True)"):
                torch.onnx.export(fn, args, dynamo=True, dynamic_shapes=shapes, verbose=False).save(files[name])
            check_onnx(files[name], len(args), "torch.onnx.export(dynamo=True)")
        return ({"engine": "onnx", "files": files},
                {"exporter": f"torch.onnx.export(dynamo=True) (torch {torch.__version__}, onnxscript "
                             f"{onnxscript.__version__})", "dynamic_dims": dims(self.task)})


def build(adapter: Any, config: Any, params: dict[str, Any], case: Case) -> TorchServable:
    return TorchServable(adapter, config, params, case)
