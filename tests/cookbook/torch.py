"""What a PyTorch user writes for each derivatives case instead of fwbench's model
(frameworks/torch/derivatives.py), for tests/measure/measure_cookbook.py to time side by side (issue
19: each case at most 1.02x this). The forms are torch.func's tutorials':

    per-sample gradients  "Per-sample-gradients": vmap(grad(compute_loss), in_dims=(None, 0, 0))
                          with compute_loss on a batch of one (unsqueeze), the GPT through
                          torch.func.functional_call; its baseline, one gradient per example
                          in a Python loop, stacked
    HVP                   "Jacobians, Hessians, hvp, vhp, and more": hvp = jvp(grad(f), primals,
                          tangents)[1] (forward-over-reverse) and hvp_revrev = vjp of grad(f)
                          applied to the tangents (reverse-over-reverse)
    Hessian, Jacobian     the same tutorial: jacfwd(jacrev(f)), jacrev(jacrev(f)), hessian(f);
                          jacrev(f, argnums=2) / jacfwd(f, argnums=2)
    ensemble              "Model ensembling": stack_module_state, a copy of the base model (on
                          the CPU, not 'meta': see ensemble_gpt), vmap(fmodel, in_dims=(0, 0,
                          None)) over functional_call; its baseline, [model(minibatch) for model
                          in models]
    n-th derivative       nested torch.func.grad (of the sum over points; elementwise), vmap of
                          nested grads of the scalar function, and the autograd form of the
                          "Higher order gradients" examples: torch.autograd.grad(create_graph=True)
                          k times (with Dynamo's trace_autograd_ops for autograd_traced)

Compiled mode is torch.compile with its defaults around the whole computation (the loop
baselines: around the one-example function), eager the plain call. The MLP's flat Hessian
parameters are split by slices and views, as torch.nn.utils.vector_to_parameters reads a
flat vector. GPT results are converted to GPT-2's names and layout (its nn.Linear weights
transposed), as fwbench's method returns them; GPT HVPs run with the math attention kernel
(the fused CPU kernel has no double backward and no forward AD, torch 2.13).

Not fwbench's code: nothing here imports frameworks/torch/derivatives.py; the GPT module is
frameworks/torch/gpt.py's (the model under test), built here from the numpy parameters.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, stack_module_state, vjp, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from frameworks.torch import gpt as tgpt
from workloads import derivatives as D
from workloads import gpt as G

MLP_KEYS = ("w1", "b1", "w2", "b2")


def compile_fn(fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
    """fn as a user runs it in `mode`: torch.compile with its defaults, or as it is."""
    return torch.compile(fn) if mode == "compiled" else fn


# ----------------------------------------------------------------------------- the MLP

def mlp(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def loss_fn(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(mlp(params, x), y.long())


def compute_loss(params: dict[str, torch.Tensor], sample: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The tutorial's per-sample loss: the model on a batch of one."""
    return loss_fn(params, sample.unsqueeze(0), target.unsqueeze(0))


def per_sample_grad_mlp(strategy: str, mode: str) -> Callable[..., Any]:
    if strategy == "vmap":
        ft_compute_sample_grad = vmap(grad(compute_loss), in_dims=(None, 0, 0))
        return compile_fn(lambda w1, b1, w2, b2, x, y: ft_compute_sample_grad(dict(zip(MLP_KEYS, (w1, b1, w2, b2))),
                                                                              x, y), mode)
    one = compile_fn(grad(compute_loss), mode)

    def loop(w1, b1, w2, b2, x, y):
        params = dict(zip(MLP_KEYS, (w1, b1, w2, b2)))
        grads = [one(params, x[i], y[i]) for i in range(x.shape[0])]
        return {k: torch.stack([g[k] for g in grads]) for k in MLP_KEYS}
    return loop


def hvp_fwdrev(f: Callable, primals: tuple, tangents: tuple) -> Any:
    return jvp(grad(f), primals, tangents)[1]


def hvp_revrev(f: Callable, primals: tuple, tangents: tuple) -> Any:
    _, vjp_fn = vjp(grad(f), *primals)
    return vjp_fn(*tangents)[0]


HVP = {"fwd_rev": hvp_fwdrev, "rev_rev": hvp_revrev}


def hvp_mlp(strategy: str, mode: str) -> Callable[..., Any]:
    hvp = HVP[strategy]

    def call(w1, b1, w2, b2, v1, vb1, v2, vb2, x, y):
        params, v = dict(zip(MLP_KEYS, (w1, b1, w2, b2))), dict(zip(MLP_KEYS, (v1, vb1, v2, vb2)))
        return hvp(lambda p: loss_fn(p, x, y), (params,), (v,))
    return compile_fn(call, mode)


def vector_to_params(theta: torch.Tensor, shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """A flat vector as a parameter dict, as torch.nn.utils.vector_to_parameters reads one."""
    out, i = {}, 0
    for k, s in shapes.items():
        n = math.prod(s)
        out[k] = theta[i:i + n].view(s)
        i += n
    return out


HESSIAN = {"jacfwd_jacrev": lambda f: jacfwd(jacrev(f)), "jacrev_jacrev": lambda f: jacrev(jacrev(f)),
           "hessian": hessian}


def hessian_mlp(strategy: str, mode: str) -> Callable[..., Any]:
    transform = HESSIAN[strategy]

    def call(theta, x, y, hidden, classes):
        shapes = {"w1": (x.shape[1], hidden), "b1": (hidden,), "w2": (hidden, classes), "b2": (classes,)}
        return transform(lambda t: loss_fn(vector_to_params(t, shapes), x, y))(theta)
    return compile_fn(call, mode)


def f_jac(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return b @ torch.tanh(a @ x)


def jacobian(strategy: str, mode: str) -> Callable[..., Any]:
    return compile_fn((jacrev if strategy == "jacrev" else jacfwd)(f_jac, argnums=2), mode)


def g(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * torch.exp(x / 2)


def nth_derivative(strategy: str, mode: str, order: int) -> Callable[..., Any]:
    if strategy in ("autograd", "autograd_traced"):
        def autograd_nth(x, order):
            x = x.detach().requires_grad_(True)
            y = g(x)
            for _ in range(order):
                (y,) = torch.autograd.grad(y.sum(), x, create_graph=True)
            return y.detach()
        fn = compile_fn(autograd_nth, mode)
        if strategy == "autograd":
            return fn

        def traced(x, order):
            with torch._dynamo.config.patch(trace_autograd_ops=True):
                return fn(x, order)
        return traced
    d = g
    for _ in range(order):
        d = grad(d) if strategy == "vmap" else (lambda h: grad(lambda x: h(x).sum()))(d)
    fn = compile_fn(vmap(d) if strategy == "vmap" else d, mode)
    return lambda x, order: fn(x)


# ----------------------------------------------------------------------------- the GPT

def gpt_modules(config: D.DerivativesConfig, params: dict[str, np.ndarray], k: int) -> tuple[list[tgpt.GPT], set[str]]:
    """The first k ensemble members as frameworks/torch/gpt.py modules, and the names of the
    weights they store transposed (nn.Linear's (out, in) against GPT-2's (in, out)). Their
    parameters do not require gradients: the transforms differentiate the weights they are
    given, and the ensemble is inference (a forward with them requiring gradients records
    autograd's graph)."""
    gcfg = G.preset(config.gpt).config
    nets = []
    for i in range(k):
        net = tgpt.GPT(gcfg)
        flip = tgpt.load(net, D.gpt_params(params, i))
        nets.append(net.requires_grad_(False))
    return nets, flip


def per_sample_grad_gpt(strategy: str, mode: str, config: D.DerivativesConfig, params: dict[str, np.ndarray]
                        ) -> Callable[..., Any]:
    (model,), flip = gpt_modules(config, params, 1)
    weights = {k: v.detach() for k, v in model.named_parameters()}

    def compute_loss(weights, sample, target):
        logits = functional_call(model, weights, (sample.unsqueeze(0),))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), target.unsqueeze(0).view(-1).long())

    if strategy == "vmap":
        fn = compile_fn(vmap(grad(compute_loss), in_dims=(None, 0, 0)), mode)

        def call(tokens, targets):
            out = fn(weights, tokens, targets)
            return {k: g.transpose(-1, -2) if k in flip else g for k, g in out.items()}
        return call
    one = compile_fn(grad(compute_loss), mode)

    def loop(tokens, targets):
        grads = [one(weights, tokens[i], targets[i]) for i in range(tokens.shape[0])]
        return {k: torch.stack([g[k].t() if k in flip else g[k] for g in grads]) for k in weights}
    return loop


def hvp_gpt(strategy: str, mode: str, config: D.DerivativesConfig, params: dict[str, np.ndarray]
            ) -> Callable[..., Any]:
    (model,), flip = gpt_modules(config, params, 1)
    weights = {k: v.detach() for k, v in model.named_parameters()}
    names, hvp = tuple(G.param_shapes(G.preset(config.gpt).config)), HVP[strategy]

    def loss(w, tokens, targets):
        logits = functional_call(model, w, (tokens,))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1).long())

    fn = compile_fn(lambda v, tokens, targets: hvp(lambda w: loss(w, tokens, targets), (weights,), (v,)), mode)

    def call(tokens, targets, *v):
        tangents = {k: t.t() if k in flip else t for k, t in zip(names, v)}
        with sdpa_kernel(SDPBackend.MATH):
            out = fn(tangents, tokens, targets)
        return {k: h.t() if k in flip else h for k, h in out.items()}
    return call


def ensemble_gpt(strategy: str, mode: str, config: D.DerivativesConfig, params: dict[str, np.ndarray], k: int
                 ) -> Callable[..., Any]:
    models, _ = gpt_modules(config, params, k)
    if strategy == "loop":
        compiled = [compile_fn(m, mode) for m in models]
        return lambda minibatch, models: torch.stack([m(minibatch) for m in compiled])
    stacked, buffers = stack_module_state(models)
    # The tutorial moves the base copy to the 'meta' device (to hold no memory); with the GPT's
    # tied head that breaks the tie (Module.to makes a new tensor per module attribute, so
    # lm_head.weight stays a meta tensor that functional_call does not replace: garbage
    # logits, measured), so the copy stays on the CPU.
    base_model = copy.deepcopy(models[0])

    def fmodel(params, buffers, x):
        return functional_call(base_model, (params, buffers), (x,))
    fn = compile_fn(lambda minibatch: vmap(fmodel, in_dims=(0, 0, None))(stacked, buffers, minibatch), mode)
    return lambda minibatch, models: fn(minibatch)


# ----------------------------------------------------------------------------- make

def make(task: str, strategy: str, mode: str, config: D.DerivativesConfig, inputs: tuple, kwargs: dict,
         params: dict[str, np.ndarray]) -> Callable[..., Any] | None:
    """The cookbook version of a derivatives case (tests/cookbook/__init__.py); every torch
    strategy has one."""
    problem, sizes = D.problem_of(task)
    gpt = "gpt" in task
    if problem == "per_sample_grad":
        return per_sample_grad_gpt(strategy, mode, config, params) if gpt else per_sample_grad_mlp(strategy, mode)
    if problem == "hvp":
        return hvp_gpt(strategy, mode, config, params) if gpt else hvp_mlp(strategy, mode)
    if problem == "ensemble":
        return ensemble_gpt(strategy, mode, config, params, sizes[0])
    if problem == "hessian":
        return hessian_mlp(strategy, mode)
    if problem == "jacobian":
        return jacobian(strategy, mode)
    return nth_derivative(strategy, mode, kwargs["order"])
