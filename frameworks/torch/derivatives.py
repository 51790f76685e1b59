"""Higher-order derivatives and vmap in PyTorch (workloads/derivatives.py): torch.func's
function transforms over plain functions of a parameter dict (the MLP needs no module; the
GPT problems will go through torch.func.functional_call), composed in
frameworks/transforms.py (shared with JAX, whose transforms have the same signatures):

    per-sample gradients   vmap: torch.func.vmap(torch.func.grad(one-example loss));
                           loop: torch.func.grad per example in a Python loop, stacked
    HVP                    fwd_rev: torch.func.jvp of torch.func.grad; rev_rev: the
                           torch.func.vjp of torch.func.grad applied to v (the tutorial's
                           hvp_revrev)
    Hessian                torch.func.jacfwd(jacrev), jacrev(jacrev), torch.func.hessian
    Jacobian               torch.func.jacrev / torch.func.jacfwd
    n-th derivative        grad: k nested torch.func.grad of the sum over points; vmap:
                           torch.func.vmap of k nested grads of the scalar function;
                           autograd: torch.autograd.grad(create_graph=True), k times;
                           autograd_traced (compiled mode only): the same under
                           torch._dynamo.config.trace_autograd_ops=True
    GPT per-sample grads   vmap / loop as above, over torch.func.functional_call of
                           frameworks/torch/gpt.py's module; GPT HVP fwd_rev / rev_rev
    ensemble               vmap: torch.func.vmap of functional_call over the parameters of
                           torch.func.stack_module_state(K modules); loop: each module
                           called as it is (compiled), stacked

Modes: "eager" runs the transforms as they are; "compiled" is torch.compile over the
transformed function with its defaults (frameworks.torch.compile_counted: graph breaks,
read from Dynamo's counters, make the case a `fallback`; see `compiled`), for the loop
baseline over the one-example gradient.

torch.compile over torch.autograd.grad (torch 2.13, measured on the n-th derivative):
by default Dynamo breaks the graph at autograd.grad ("using `torch.autograd.grad` with
`torch._dynamo.config.trace_autograd_ops=False`"), order 1 then runs as a `fallback`, and
from the second order on AOTAutograd refuses ("torch.compile with aot_autograd does not
currently support double backward"): a refusal by the framework, so those cases are
`unsupported` with its message (as workloads/interop.py classifies refusals: refused ->
unsupported). `config.compiled_autograd=True` refuses every order ("torch.compile does not
currently support higher order gradients."), so it is not a strategy. With
`trace_autograd_ops=True` Dynamo traces autograd.grad into the graph: every order 1..6
compiles fullgraph and matches the reference (`autograd_traced`).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import func
from torch.nn.attention import SDPBackend, sdpa_kernel

from frameworks import transforms as T
from frameworks.base import Unsupported
from frameworks.torch import compile_counted
from frameworks.torch import gpt as tgpt
from workloads import derivatives as D
from workloads import gpt as G
from workloads.case import Case
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only

Params = dict[str, torch.Tensor]


def logits(p: Params, x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def mean_loss(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits(p, x), y.long())


def example_loss(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The loss of one example (x (d_in,), y ())."""
    return mean_loss(p, x.unsqueeze(0), y.unsqueeze(0))


def g(x: torch.Tensor) -> torch.Tensor:
    """sin(x) exp(x/2), the n-th derivative problem's function."""
    return torch.sin(x) * torch.exp(x / 2)


def unflattener(mlp: D.MLP) -> Callable[[torch.Tensor], Params]:
    """The MLP's parameters from the flat vector by a slice and a view per parameter, as
    torch's own torch.nn.utils.vector_to_parameters reads one (torch.split and views measured
    the same: compiled Hessian at P = 100, 1.02x, within noise)."""
    return lambda theta: D.unflatten(theta, mlp, torch.reshape)


FUNC = T.Func(grad=func.grad, vmap=lambda f, in_dims: func.vmap(f, in_dims=in_dims), jvp=func.jvp,
              jacfwd=func.jacfwd, jacrev=func.jacrev, hessian=func.hessian, stack=torch.stack,
              unflattener=unflattener, tanh=torch.tanh, mean_loss=mean_loss, example_loss=example_loss, g=g,
              vjp=func.vjp)


# What AOTAutograd says when it refuses a double backward (a refusal: `unsupported`).
DOUBLE_BACKWARD = "does not currently support double backward"


def autograd_nth(x: torch.Tensor, order: int) -> torch.Tensor:
    """k nested torch.autograd.grad calls (create_graph keeps each derivative differentiable)."""
    x = x.detach().requires_grad_(True)
    d = g(x)
    for _ in range(order):
        (d,) = torch.autograd.grad(d.sum(), x, create_graph=True)
    return d.detach()


class TorchDerivatives(T.FuncModel):
    func = FUNC
    framework = "torch"

    def hvp_gpt(self, tokens: torch.Tensor, targets: torch.Tensor, *v: torch.Tensor) -> dict[str, torch.Tensor]:
        """With the math attention kernel: the GPT's F.scaled_dot_product_attention picks the
        fused CPU flash kernel, which has neither forward AD ("Trying to use forward AD with
        _scaled_dot_product_flash_attention_for_cpu that does not support it") nor a double
        backward ("derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward
        is not implemented"); the math kernel has both (measured, torch 2.13)."""
        with sdpa_kernel(SDPBackend.MATH):
            return super().hvp_gpt(tokens, targets, *v)

    def make_ensemble(self, strategy: str, k: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """loop: each member's module called as it is (compiled in compiled mode), as the
        "Model ensembling" tutorial's baseline writes it ([model(minibatch) for model in
        models]). Through functional_call with each member's parameter dict, which swaps the
        module's parameters on every call, the eager loop took 1.8x that at the tiny preset
        (1 thread, interleaved; tests/measure/measure_cookbook.py). vmap: FuncModel's."""
        if strategy != "loop":
            return super().make_ensemble(strategy, k)
        forwards = [self.jit(net) for net in self.gpt.nets[:k]]
        return lambda tokens: torch.stack([forward(tokens) for forward in forwards])

    def make_nth_derivative(self, strategy: str, order: int) -> Callable[[torch.Tensor], torch.Tensor]:
        if strategy == "autograd":
            return refusal_unsupported(self.jit(lambda x: autograd_nth(x, order)))
        if strategy == "autograd_traced":
            fn = self.jit(lambda x: autograd_nth(x, order))

            def traced(x: torch.Tensor) -> torch.Tensor:
                with torch._dynamo.config.patch(trace_autograd_ops=True):   # compiles and guards under it
                    return fn(x)
            return traced
        return super().make_nth_derivative(strategy, order)


def refusal_unsupported(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, with AOTAutograd's refusal of a double backward raised as Unsupported (the
    framework's own message): the compiler refused, nothing ran wrong."""
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except RuntimeError as e:
            if DOUBLE_BACKWARD not in str(e):
                raise
            raise Unsupported(f"torch.compile refused: {str(e).splitlines()[0]}") from None
    return call


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """torch.compile with its defaults, as a torch.func user compiles a transform, and nothing
    of fwbench's around it; its graph breaks are recorded from Dynamo's counters
    (frameworks.torch.compile_counted: a break makes the case a `fallback`).

    It was once torch.compile(fullgraph=True, dynamic=False). Both settings
    cost per call, inside torch.compile's wrapper (measured on the compiled 100x100
    Jacobian, torch 2.13, 1 thread, interleaved: 114 us with the defaults, 123 us with
    dynamic=False, which patches Dynamo's config around every call, 127 us with
    fullgraph=True, 130 us with both), a tax on 0.1 ms calls that a user of the defaults
    does not pay. What they were for is kept: breaks are still caught (from the counters),
    and every case still compiles a static graph of its one shape, now
    because each case starts from reset Dynamo state (`build`, and the harness's
    case_caches). dynamic=False was there because a process times several sizes of one
    transform, and without a reset the second size recompiled with dynamic shapes
    (measured then: jacfwd failed, "failed while attempting to run meta for
    aten._new_zeros_with_same_feature_meta"); after torch._dynamo.reset() a second size
    compiles static (Dynamo's guards read size=[64, 50], without the reset [64, None])."""
    return compile_counted(fn)


def gpt_func(config: D.DerivativesConfig, params: dict[str, np.ndarray], device: str) -> T.GPTFunc:
    """The GPT of frameworks/torch/gpt.py as functions of its parameters: one module per
    ensemble member, called through torch.func.functional_call with a parameter dict (the
    module's layout: its nn.Linear weights are GPT-2's transposed; results and tangents are
    converted at the boundary, outside the transforms); the ensemble stacked by
    torch.func.stack_module_state."""
    gcfg = G.preset(config.gpt).config
    nets = []
    for k in range(max(config.ensemble_models)):
        net = tgpt.GPT(gcfg).to(device)
        flip = tgpt.load(net, D.gpt_params(params, k))
        nets.append(net.requires_grad_(False))
    net, names = nets[0], tuple(G.param_shapes(gcfg))

    def logits(p: Params, tokens: torch.Tensor) -> torch.Tensor:
        return func.functional_call(net, p, (tokens.long(),))

    def loss(p: Params, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        out = logits(p, tokens)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1).long())

    def layout(d: Params) -> Params:      # GPT-2 <-> module layout (its own inverse)
        return {k: a.transpose(-1, -2) if k in flip else a for k, a in d.items()}

    members = [{k: p.detach() for k, p in n.named_parameters()} for n in nets]
    func_ = FUNC.with_model(loss, lambda p, t, y: loss(p, t[None], y[None]), logits)

    def stacked(k: int) -> dict[str, torch.Tensor]:
        return {n: p.detach() for n, p in func.stack_module_state(nets[:k])[0].items()}
    out = T.GPTFunc(gcfg, func_, members, stacked,
                    named=layout, own=lambda v: layout(dict(zip(names, v))))
    out.nets = nets       # the ensemble's loop calls the modules themselves (TorchDerivatives.ensemble_gpt)
    return out


def build(adapter: Any, config: D.DerivativesConfig, params: dict[str, np.ndarray], case: Case) -> TorchDerivatives:
    model = TorchDerivatives(adapter, case, compiled if case.mode == "compiled" else (lambda f: f))
    model.gpt = gpt_func(config, params, case.device)
    return model
