"""What the three derivatives models (frameworks/<fw>/derivatives.py) share, framework-free:
choosing each problem's strategy and building its transformed function once per static size.

A model is built for one strategy (the case's). Each method names its problem; the
strategy must be one the workload declares for that problem and framework
(workloads.derivatives.STRATEGIES), else the call raises Unsupported. The function for a
problem and its static sizes (hidden width, derivative order) is made on first use by the
framework's `make(strategy, *static)`, which applies the mode's compiler where it belongs
(usually to the whole transformed function; the `loop` baselines compile the one-example
gradient and loop in Python), so a first call includes tracing and compiling.
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Callable

from frameworks.base import Unsupported
from workloads import derivatives as D
from workloads.base import Model
from workloads.case import Case
from workloads.record import not_its_api


class TransformModel(Model):
    framework = ""

    def __init__(self, adapter: Any, case: Case) -> None:
        self.adapter, self.case = adapter, case
        self.mode, self.device, self.strategy = case.mode, case.device, case.strategy
        self._fns: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def strategy_for(self, problem: str) -> str:
        """The case's strategy for `problem` (its default when the case has none)."""
        declared = tuple(s for s in D.STRATEGIES[problem].get(self.framework, ())
                         if self.mode == "compiled" or s not in D.COMPILED_ONLY)
        chosen = self.strategy if self.strategy is not None else (declared[0] if declared else None)
        if chosen not in declared:
            raise Unsupported(not_its_api(self.framework, f"{chosen!r} strategy for {problem} in {self.mode} mode "
                                                        f"(it has {', '.join(declared) or 'none'})"))
        return chosen

    def fn(self, problem: str, make: Callable[..., Callable[..., Any]], *static: Any) -> Callable[..., Any]:
        """make(strategy, *static), made once per problem and static sizes."""
        key = (problem, *static)
        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = make(self.strategy_for(problem), *static)
        return fn


# ----------------------------------------------------------------------------- torch.func and JAX
# torch.func mirrors JAX's transforms (grad, vmap, jvp, jacfwd, jacrev, hessian: same
# signatures and semantics), so both frameworks compose them in this one place; each passes
# its transforms and its own model functions (Func) and keeps only what differs.

class Func:
    """One framework's transforms and model functions, as the makers below use them.
    `logits(p, tokens)` is the GPT's forward (the ensemble's); `with_model` gives the same
    transforms over another model's losses (the GPT's, for its per-sample gradients and HVP).
    `unflattener(mlp)` gives the function that turns the Hessian's flat parameter vector into
    the MLP's parameter dict, as that framework's user splits one (made once, outside any
    trace). `vjp`, where given, makes the reverse-over-reverse HVP the vjp of the gradient
    (torch.func's tutorial form) instead of the gradient of <gradient, v> (JAX's cookbook
    form)."""

    def __init__(self, *, grad: Callable, vmap: Callable, jvp: Callable, jacfwd: Callable, jacrev: Callable,
                 hessian: Callable, stack: Callable, unflattener: Callable[[D.MLP], Callable[[Any], dict[str, Any]]],
                 tanh: Callable, mean_loss: Callable, example_loss: Callable, g: Callable,
                 logits: Callable | None = None, vjp: Callable | None = None) -> None:
        self.grad, self.vmap, self.jvp = grad, vmap, jvp
        self.jacfwd, self.jacrev, self.hessian = jacfwd, jacrev, hessian
        self.vjp = vjp
        self.stack, self.unflattener, self.tanh = stack, unflattener, tanh
        self.mean_loss, self.example_loss, self.g, self.logits = mean_loss, example_loss, g, logits

    def with_model(self, mean_loss: Callable, example_loss: Callable, logits: Callable) -> "Func":
        f = copy.copy(self)
        f.mean_loss, f.example_loss, f.logits = mean_loss, example_loss, logits
        return f


def tree_vdot(a: dict[str, Any], b: dict[str, Any]) -> Any:
    return sum((a[k] * b[k]).sum() for k in a)


def mlp_params(w1: Any, b1: Any, w2: Any, b2: Any) -> dict[str, Any]:
    return dict(zip(D.MLP_KEYS, (w1, b1, w2, b2)))


def make_per_sample_grad(strategy: str, f: Func, jit: Callable, flat: bool = False) -> Callable[..., Any]:
    """vmap: vmap(grad(one-example loss)) over the examples; loop: grad per example, stacked.
    Called (p, x, y) with a parameter dict p (the GPT's), or with `flat` (w1, b1, w2, b2, x,
    y) (the MLP's): the compiled function then takes the arrays and makes the dict inside,
    as a user compiles it. A dict argument costs every call more than its arrays do (JAX
    flattens the pytree, Dynamo guards its keys): the MLP's compiled HVP took 1.05x (JAX)
    and 1.10x (torch) the cookbook's time with the dicts made outside (small preset, 1
    thread, interleaved; tests/measure/measure_cookbook.py)."""
    grad = f.grad(f.example_loss)
    if strategy == "vmap":
        batched = f.vmap(grad, (None, 0, 0))
        if flat:    # the dict made inline: a call of a helper of ours is one more guard per call
            keys = D.MLP_KEYS
            return jit(lambda w1, b1, w2, b2, x, y: batched(dict(zip(keys, (w1, b1, w2, b2))), x, y))
        return jit(batched)
    one = jit(grad)

    def loop(p: dict[str, Any], x: Any, y: Any) -> dict[str, Any]:
        grads = [one(p, x[i], y[i]) for i in range(x.shape[0])]
        return {k: f.stack([gi[k] for gi in grads]) for k in p}
    if flat:
        return lambda w1, b1, w2, b2, x, y: loop(mlp_params(w1, b1, w2, b2), x, y)
    return loop


def hvp_of(strategy: str, f: Func) -> Callable[..., Any]:
    """(p, v, x, y) -> H v of the mean loss at p. fwd_rev: jvp of grad; rev_rev: the vjp of
    grad where the framework's docs write it so (torch.func), else grad of <grad, v> (JAX's
    autodiff cookbook). torch's grad of <grad, v> took 1.41x (MLP) and 1.32x (GPT) the
    vjp form's time in eager mode (small preset, 1 thread, interleaved)."""
    gradient = f.grad(f.mean_loss)
    if strategy == "fwd_rev":
        return lambda p, v, x, y: f.jvp(lambda q: gradient(q, x, y), (p,), (v,))[1]
    if f.vjp is not None:
        return lambda p, v, x, y: f.vjp(lambda q: gradient(q, x, y), p)[1](v)[0]
    return lambda p, v, x, y: f.grad(lambda q: tree_vdot(gradient(q, x, y), v))(p)


def make_hvp(strategy: str, f: Func, jit: Callable, flat: bool = False) -> Callable[..., Any]:
    """The compiled HVP, called (p, v, x, y) with dicts (the GPT's) or with `flat` (w1, b1,
    w2, b2, v1, vb1, v2, vb2, x, y) (the MLP's; see make_per_sample_grad)."""
    hvp = hvp_of(strategy, f)
    if flat:
        keys = D.MLP_KEYS
        return jit(lambda w1, b1, w2, b2, v1, vb1, v2, vb2, x, y:
                   hvp(dict(zip(keys, (w1, b1, w2, b2))), dict(zip(keys, (v1, vb1, v2, vb2))), x, y))
    return jit(hvp)


def make_hessian(strategy: str, f: Func, jit: Callable, mlp: D.MLP) -> Callable[..., Any]:
    compose = {"jacfwd_jacrev": lambda h: f.jacfwd(f.jacrev(h)), "jacrev_jacrev": lambda h: f.jacrev(f.jacrev(h)),
               "hessian": f.hessian}[strategy]
    unflatten = f.unflattener(mlp)
    return jit(lambda theta, x, y: compose(lambda t: f.mean_loss(unflatten(t), x, y))(theta))


def make_jacobian(strategy: str, f: Func, jit: Callable) -> Callable[..., Any]:
    """jacrev / jacfwd of f(a, b, x) = b tanh(a x) with respect to x (argnums=2), the form
    the torch.func and JAX docs write. The closure form, jac(lambda z: b @ tanh(a @ z))(x)
    inside a compiled lambda, cost torch.compile about 6 us more per call (120 against
    114 us at 100x100, torch 2.13, 1 thread, interleaved)."""
    jac = f.jacrev if strategy == "jacrev" else f.jacfwd
    tanh = f.tanh
    return jit(jac(lambda a, b, x: b @ tanh(a @ x), argnums=2))


def make_ensemble(strategy: str, f: Func, jit: Callable) -> Callable[..., Any]:
    """vmap: the forward vmapped over K stacked parameter sets (a dict of (K, ...) arrays);
    loop: the compiled forward of each of the K parameter dicts (a list), stacked."""
    if strategy == "vmap":
        return jit(f.vmap(f.logits, (0, None)))
    one = jit(f.logits)
    return lambda members, tokens: f.stack([one(p, tokens) for p in members])


def make_nth_derivative(strategy: str, f: Func, jit: Callable, order: int) -> Callable[[Any], Any]:
    """grad: k nested grads of the sum over points (each point's derivative depends on its own
    x only); vmap: vmap over points of k nested grads of the scalar function."""
    d = f.g
    for _ in range(order):
        d = f.grad(d) if strategy == "vmap" else (lambda h: f.grad(lambda x: h(x).sum()))(d)
    return jit(f.vmap(d, 0) if strategy == "vmap" else d)



class FuncModel(TransformModel):
    """workloads.derivatives.DerivativesModel for a framework with JAX-style transforms
    (torch.func, JAX): `func` holds them, `jit` is the mode's compiler (identity in eager
    mode), and `make_nth_derivative` may add the framework's own strategies."""
    func: Func

    def __init__(self, adapter: Any, case: Case, jit: Callable) -> None:
        super().__init__(adapter, case)
        self.jit = jit

    def make_nth_derivative(self, strategy: str, order: int) -> Callable[[Any], Any]:
        return make_nth_derivative(strategy, self.func, self.jit, order)

    # The MLP problems', the Jacobian's and the n-th derivative's calls take 0.02-0.1 ms, so
    # their methods do as little as they can in Python before the compiled call: the made
    # function is looked up by a constant key first (tests/measure/measure_cookbook.py compares them
    # with what a user writes; right after a call every Python step costs several times what
    # it costs alone, measured with JAX at 1 thread: a 0.5 us check took 2 us there).
    def per_sample_grad(self, w1: Any, b1: Any, w2: Any, b2: Any, x: Any, y: Any) -> dict[str, Any]:
        fn = self._fns.get(("per_sample_grad",)) or self.fn("per_sample_grad", self._make_psg)
        return fn(w1, b1, w2, b2, x, y)

    def _make_psg(self, strategy: str) -> Callable[..., Any]:
        return make_per_sample_grad(strategy, self.func, self.jit, True)

    def hvp(self, w1: Any, b1: Any, w2: Any, b2: Any, v1: Any, vb1: Any, v2: Any, vb2: Any,
            x: Any, y: Any) -> dict[str, Any]:
        fn = self._fns.get(("hvp",)) or self.fn("hvp", self._make_hvp)
        return fn(w1, b1, w2, b2, v1, vb1, v2, vb2, x, y)

    def _make_hvp(self, strategy: str) -> Callable[..., Any]:
        return make_hvp(strategy, self.func, self.jit, True)

    def hessian(self, theta: Any, x: Any, y: Any, hidden: int, classes: int) -> Any:
        D.check_sizes(hidden=hidden, classes=classes)
        return self.fn("hessian", self._make_hessian, x.shape[1], hidden, classes)(theta, x, y)

    def _make_hessian(self, strategy: str, d_in: int, hidden: int, classes: int) -> Callable[..., Any]:
        return make_hessian(strategy, self.func, self.jit, D.MLP(int(d_in), int(hidden), int(classes)))

    def jacobian(self, a: Any, b: Any, x: Any) -> Any:
        fn = self._fns.get(("jacobian",)) or self.fn("jacobian", self._make_jacobian)
        return fn(a, b, x)

    def _make_jacobian(self, strategy: str) -> Callable[..., Any]:
        return make_jacobian(strategy, self.func, self.jit)

    def nth_derivative(self, x: Any, order: int) -> Any:
        # a call takes 20 us compiled: an order whose function exists has passed the rule
        # (a Python int: True, equal to 1 as a key, takes the checked path)
        fn = self._fns.get(("nth_derivative", order)) if type(order) is int else None
        if fn is None:
            D.check_order(order)
            fn = self.fn("nth_derivative", self.make_nth_derivative, order)
        return fn(x)

    # -- the GPT problems: `gpt` (a GPTFunc) holds the framework's functional GPT
    gpt: "GPTFunc"

    def per_sample_grad_gpt(self, tokens: Any, targets: Any) -> dict[str, Any]:
        g = self.gpt
        return g.named(self.fn("per_sample_grad", make_per_sample_grad, g.func, self.jit)(g.params, tokens, targets))

    def hvp_gpt(self, tokens: Any, targets: Any, *v: Any) -> dict[str, Any]:
        g = self.gpt
        return g.named(self.fn("hvp", make_hvp, g.func, self.jit)(g.params, g.own(v), tokens, targets))

    def ensemble_gpt(self, tokens: Any, models: int) -> Any:
        g = self.gpt
        D.check_models(models, len(g.members))
        return self.fn("ensemble", self.make_ensemble, models)(tokens)

    def make_ensemble(self, strategy: str, k: int) -> Callable[[Any], Any]:
        """tokens -> the first k members' logits, stacked: make_ensemble's function with its
        members bound (the stacked parameters for vmap, the k parameter dicts for loop)."""
        g = self.gpt
        members = g.stacked(k) if strategy == "vmap" else g.members[:k]
        return functools.partial(make_ensemble(strategy, g.func, self.jit), members)


class GPTFunc:
    """A framework's GPT (workloads.gpt config `config`) as functions of a parameter dict:
    `func` (its transforms over the GPT's losses and forward), member 0's parameters
    `params` and every ensemble member's (`members`), all in the framework's own layout;
    `named` turns a result keyed like `params` into GPT-2's names and layout, `own` the
    tangents given in GPT-2's layout (a tuple in workloads.gpt.param_shapes order) into a
    dict like `params`."""

    def __init__(self, config: Any, func: Func, members: list[dict[str, Any]], stack: Callable[[int], dict[str, Any]],
                 named: Callable[[dict[str, Any]], dict[str, Any]], own: Callable[[tuple[Any, ...]], dict[str, Any]]
                 ) -> None:
        self.config, self.func, self.members, self.params = config, func, members, members[0]
        self.named, self.own, self._stack = named, own, stack
        self._stacked: dict[int, dict[str, Any]] = {}

    def stacked(self, k: int) -> dict[str, Any]:
        """The first k members stacked, a dict of (k, ...) arrays: stack(k), made once per k."""
        if k not in self._stacked:
            self._stacked[k] = self._stack(k)
        return self._stacked[k]
