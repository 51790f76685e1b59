"""The equivalence checks every workload shares, run once per (framework, mode).

A workload's test module describes its inputs in a `Workload` and calls these checks:
export round-trips exactly; the forward output and loss match the numpy float64 reference
(relative error <= 1e-4); every gradient and every parameter after 3 optimizer steps
match the baseline implementation (<= 1e-3); the baseline's AdamW matches the numpy AdamW
reference; the loss falls over 20 steps on one batch; compiled/graph agree with eager.

Relative error is the Frobenius norm ||a - b|| / ||b|| per tensor (workloads.base.rel_err).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import frameworks
from tests.helpers import baseline
from workloads.base import AdamW, adamw_reference, max_rel_err, rel_err

STEPS = 20


@dataclass
class Workload:
    name: str                                   # "gpt", "diffusion"
    config: Any
    params: dict[str, np.ndarray]
    forward: tuple[str, tuple[np.ndarray, ...]]  # model method and its inputs
    batch: tuple[np.ndarray, ...]               # inputs of loss / grads / train_step
    optimizer: AdamW
    decayed: Callable[[str, tuple[int, ...]], bool]
    # name -> (method, inputs, kwargs): workload-specific outputs (generation, sampling)
    extras: dict[str, tuple[str, tuple[np.ndarray, ...], dict[str, Any]]] = field(default_factory=dict)
    loss_drop: float = 0.8                      # loss after 20 steps < loss_drop * first loss
    # parameters whose gradient is exactly zero in exact arithmetic (e.g. attention key
    # biases: they shift every score of a softmax row equally). Their float32 values are
    # rounding residue, so they are checked to be negligible instead of compared.
    zero_grad: Callable[[str], bool] = lambda name: False
    _cache: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def build(self, name: str, mode: str, params: dict[str, np.ndarray] | None = None):
        fw = frameworks.load(name)
        return fw, fw.build(self.name, self.config, self.params if params is None else params, mode, "cpu")

    def run(self, name: str, mode: str) -> dict[str, Any]:
        """Everything the checks compare, computed once per implementation, in an order
        that leaves training (which changes the parameters) for last."""
        key = (name, mode)
        if key not in self._cache:
            fw, m = self.build(name, mode)
            arr = lambda xs: tuple(fw.asarray(a, "cpu") for a in xs)  # noqa: E731
            method, inputs = self.forward
            batch = arr(self.batch)
            out = {"export": m.export_params(),
                   "forward": fw.to_numpy(getattr(m, method)(*arr(inputs))),
                   "loss": float(fw.to_numpy(m.loss(*batch))),
                   "grads": fw.to_numpy(m.grads(*batch)),
                   "losses": []}
            for k, (meth, ins, kw) in self.extras.items():
                out[k] = fw.to_numpy(getattr(m, meth)(*arr(ins), **kw))
            for step in range(STEPS):
                out["losses"].append(float(fw.to_numpy(m.train_step(*batch))))
                if step == 2:
                    out["after3"] = m.export_params()
            self._cache[key] = out
        return self._cache[key]

    def base(self) -> dict[str, Any]:
        if baseline() is None:
            pytest.skip("no framework installed")
        return self.run(*baseline())

    # -- checks ---------------------------------------------------------------------
    def check_export(self, name: str, mode: str) -> None:
        out = self.run(name, mode)["export"]
        assert set(out) == set(self.params)
        for k, v in self.params.items():
            assert out[k].dtype == np.float32 and out[k].shape == v.shape, k
            np.testing.assert_array_equal(out[k], v, err_msg=k)

    def check_forward_and_loss(self, name: str, mode: str, ref_forward: np.ndarray, ref_loss: float) -> None:
        out = self.run(name, mode)
        assert out["forward"].shape == ref_forward.shape
        assert rel_err(out["forward"], ref_forward) <= 1e-4
        assert abs(out["loss"] - ref_loss) / abs(ref_loss) <= 1e-4

    def compare_grads(self, out: dict[str, np.ndarray], base: dict[str, np.ndarray], tol: float) -> None:
        total = np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in base.values()))
        zero = [k for k in base if self.zero_grad(k)]
        for k in zero:
            for g in (out[k], base[k]):
                assert np.linalg.norm(g) <= 1e-6 * total, f"gradient of {k} should vanish"
        err, key = max_rel_err({k: v for k, v in out.items() if k not in zero},
                               {k: v for k, v in base.items() if k not in zero})
        assert err <= tol, f"gradient of {key}: relative error {err:.2e}"

    def check_grads(self, name: str, mode: str) -> None:
        base = self.base()["grads"]
        self.compare_grads(self.run(name, mode)["grads"], base, 1e-3)
        # all-zero gradients would agree with each other: the baseline must be informative
        assert sum(np.linalg.norm(g) > 0 for g in base.values()) >= 0.9 * len(base)

    def check_steps(self, name: str, mode: str) -> None:
        err, key = max_rel_err(self.run(name, mode)["after3"], self.base()["after3"])
        assert err <= 1e-3, f"{key} after 3 AdamW steps: relative error {err:.2e}"

    def check_baseline_adamw(self) -> None:
        """Replay the baseline's 3 steps with the numpy AdamW, using the framework's own
        gradients at each step's parameters."""
        self.base()
        name, mode = baseline()
        fw = frameworks.load(name)
        batch = tuple(fw.asarray(a, "cpu") for a in self.batch)
        decay = [k for k, v in self.params.items() if self.decayed(k, v.shape)]
        params, grads_seq = self.params, []
        for _ in range(3):
            grads_seq.append(fw.to_numpy(self.build(name, mode, params)[1].grads(*batch)))
            params = {k: v.astype(np.float32) for k, v in
                      adamw_reference(self.params, grads_seq, self.optimizer, decay).items()}
        err, key = max_rel_err(self.base()["after3"], params)
        assert err <= 1e-4, f"{key}: relative error {err:.2e}"
        assert max_rel_err(self.params, params)[0] > 1e-4   # the steps moved the parameters

    def check_loss_falls(self, name: str, mode: str) -> None:
        losses = self.run(name, mode)["losses"]
        assert len(losses) == STEPS and all(np.isfinite(losses))
        assert losses[-1] < self.loss_drop * losses[0], losses

    def check_agrees_with_eager(self, name: str, mode: str) -> None:
        eager, out = self.run(name, "eager"), self.run(name, mode)
        assert rel_err(out["forward"], eager["forward"]) <= 1e-5
        self.compare_grads(out["grads"], eager["grads"], 1e-4)
