"""The checks every framework runs for every reduced-precision policy (workloads/precision.py),
and the one table of their tolerances per policy: the mixin of tests/test_precision_torch.py,
test_precision_jax.py and test_precision_tensorflow.py, as tests/support/equivalence.py is the fp32 tests'.

A framework's module subclasses `PrecisionChecks` (its name, the modes its equivalence runs
in, how its training run is set up, and its float64 reference of the UNet's gradient) and
keeps what only it can do: the probe of the dtypes its programs actually run (aten ops under
a TorchDispatchMode, jaxprs, TF graphs), generic over the policy's compute dtype, and the
wrong models that must fail that probe. The mixin's tests run for every policy with a row in
TOL for that framework, so a new policy (fp16) is its rows here and nothing else in tests/.

Checked against the float64 references of tests/test_gpt_equivalence.py and
tests/test_diffusion_equivalence.py (tiny presets, O(1) weights), each check asserted only
where the framework's row names it (the rows keep each framework's measured bounds):
  forward        relative Frobenius error of the logits / eps                      (at most)
  forward_floor  the same error, at least: a model below it is not running the policy's products
  loss           |loss - ref| / |ref|                                              (at most)
  grad_cosine    cosine with the float64 gradient, the worst tensor                (at least)
  grad_cosine_all  every tensor as one vector                                      (at least)
  grad_fd        tests/support/equivalence.py's directional derivatives against float64 differences (at most)
  ddim, ddpm     the 10-step DDIM and 5-step DDPM trajectories                     (at most)
  gen_same, gen_nocache_same  share of greedy tokens (with, without the cache) equal to the
                 float64 reference's; gen_cache_same: with the cache equal to without (at least)
  train50        max |loss / fp32 loss - 1| over 50 AdamW steps of the tiny GPT    (at most)
  train_drop     last loss / first loss, both precisions                          (below)
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import frameworks
from tests import test_diffusion_equivalence as TD
from tests import test_gpt_equivalence as TG
from tests.support import equivalence as E
from tests.support.helpers import DEVICE, grad_cosines
from workloads import gpt
from workloads.base import rel_err
from workloads.case import Case, Placement
from workloads.precision import DEFAULT

WORKLOADS = ("gpt", "diffusion")
# Checks bounded from below (every other check is an upper bound).
AT_LEAST = ("forward_floor", "grad_cosine", "grad_cosine_all", "gen_same", "gen_nocache_same", "gen_cache_same")

# policy -> (framework, workload, check) -> tolerance. Each bf16 row was measured with its
# framework's `python -m tests.test_precision_<framework>` (docs/measurements/bf16-<framework>.txt:
# tiny presets, O(1) weights, 2-core CPU with native bf16); "achieved" follows each value.
TOL: dict[str, dict[tuple[str, str, str], float]] = {
    "bf16": {
        # torch, eager (compiled: its module's slow tests): ~10x the error achieved. The gradient
        # bounds are 1 - 10 x (1 - the worst cosine achieved, gpt or diffusion): the worst tensors
        # reach 0.9985 (gpt h.0.ln_1.bias) and 0.9990 (diffusion down.1.attn.0.k.weight).
        ("torch", "gpt", "forward"): 1.5e-1,            # 1.4e-2 (logits)
        ("torch", "gpt", "forward_floor"): 1e-3,        # float32's errors are ~1e-6
        ("torch", "gpt", "loss"): 3e-3,                 # 2.3e-4
        ("torch", "gpt", "grad_cosine"): 0.985,         # 0.99850
        ("torch", "gpt", "grad_cosine_all"): 0.989,     # 0.99890
        ("torch", "gpt", "gen_same"): 0.9,              # 1.0 (greedy tokens: argmax, not a smooth function)
        ("torch", "gpt", "gen_nocache_same"): 0.9,      # 1.0
        ("torch", "gpt", "train50"): 8e-3,              # 8.4e-4 (worst step, 49; mean 8.0e-5)
        ("torch", "gpt", "train_drop"): 0.9,            # 5.57 -> 4.15
        ("torch", "diffusion", "forward"): 1.2e-1,      # 1.24e-2 (eps)
        ("torch", "diffusion", "forward_floor"): 1e-3,
        ("torch", "diffusion", "loss"): 4e-3,           # 3.4e-4
        ("torch", "diffusion", "grad_cosine"): 0.985,   # 0.99896
        ("torch", "diffusion", "grad_cosine_all"): 0.989,  # 0.99988
        ("torch", "diffusion", "ddim"): 1e-1,           # 8.7e-3 (eager; compiled 8.3e-3)
        # jax, eager and compiled: 2.5-5x the error achieved, not 10x: for fixed inputs the bf16
        # error is a deterministic property of the policy (eager and compiled agree to 3 digits),
        # and 10x (logits 0.12, cosine 0.99) would pass errors far beyond what bf16 rounding of
        # the products' inputs causes; what breaks the policy without moving these numbers much
        # (a norm or softmax in bf16) is the probe's to catch.
        ("jax", "gpt", "forward"): 3e-2,                # 1.20e-2, 1.20e-2 (eager, compiled)
        ("jax", "gpt", "forward_floor"): 100 * E.tol("forward", "gpt"),
        ("jax", "gpt", "loss"): 3e-4,                   # 2.9e-5, 2.9e-5
        ("jax", "gpt", "grad_cosine"): 0.995,           # 0.99918 (wpe.weight), both modes
        ("jax", "gpt", "gen_cache_same"): 1.0,          # the cache changes nothing (measured equal)
        ("jax", "gpt", "train50"): 3e-3,                # 2.6e-4
        ("jax", "gpt", "train_drop"): 0.8,
        ("jax", "diffusion", "forward"): 3e-2,          # 8.95e-3, 8.95e-3 (eps)
        ("jax", "diffusion", "forward_floor"): 100 * E.tol("forward", "diffusion"),
        ("jax", "diffusion", "loss"): 4e-4,             # 3.9e-5, 3.3e-5
        ("jax", "diffusion", "grad_cosine"): 0.995,     # 0.9990 (down.1.attn.0.k.weight)
        ("jax", "diffusion", "grad_fd"): 0.5,           # 5.2e-2, 5.6e-2 (mid.attn_1; a coarse measure)
        ("jax", "diffusion", "ddim"): 3e-2,             # 7.0e-3, both modes
        ("jax", "diffusion", "ddpm"): 3e-2,             # 6.9e-3, both modes
        # tensorflow, eager, graph and compiled: about 3x the worst error measured over the modes
        # (docs/measurements/bf16-tensorflow.txt says why 3x rather than the fp32 table's 10x).
        ("tensorflow", "gpt", "forward"): 4e-2,         # 1.43e-2 (every mode)
        ("tensorflow", "gpt", "loss"): 1e-3,            # 2.28e-4
        ("tensorflow", "gpt", "grad_cosine"): 1 - 5e-3,  # 1 - 1.54e-3 (h.0.ln_1.bias)
        ("tensorflow", "gpt", "grad_fd"): 2.5e-1,       # 7.89e-2
        ("tensorflow", "gpt", "gen_same"): 0.9,         # 1.0
        ("tensorflow", "gpt", "gen_cache_same"): 0.9,   # 1.0
        ("tensorflow", "gpt", "train50"): 1e-2,         # 1.25e-3 (step 44 of 0..49)
        ("tensorflow", "gpt", "train_drop"): 0.8,
        ("tensorflow", "diffusion", "forward"): 4e-2,   # 1.23e-2 (compiled 1.02e-2)
        ("tensorflow", "diffusion", "loss"): 1.5e-3,    # 4.23e-4 (compiled; eager and graph 5.2e-5)
        ("tensorflow", "diffusion", "grad_cosine"): 1 - 6e-3,  # 1 - 1.72e-3 (against TF fp32)
        ("tensorflow", "diffusion", "grad_fd"): 1e-1,   # 2.92e-2
        ("tensorflow", "diffusion", "ddim"): 2.5e-2,    # 8.12e-3
        ("tensorflow", "diffusion", "ddpm"): 2.5e-2,    # 8.24e-3
    },
}
TRAIN_STEPS = 50


def tol(precision: str, framework: str, workload: str, check: str) -> float | None:
    """The tolerance of a check, None where the framework's row does not name it."""
    return TOL[precision].get((framework, workload, check))


def tested_precisions(framework: str) -> list[str]:
    """The reduced policies with a tolerance row for the framework."""
    return [p for p, rows in TOL.items() if any(k[0] == framework for k in rows)]


def violations(err: dict[str, Any], precision: str, framework: str, workload: str) -> list[str]:
    """The checks of the framework's row that a measurement `err` fails."""
    bad = []
    for (f, w, check), bound in TOL[precision].items():
        if (f, w) != (framework, workload) or check.startswith("train"):
            continue
        value = err["forward" if check == "forward_floor" else check]
        ok = value > bound if check == "forward_floor" else value >= bound if check in AT_LEAST else value <= bound
        if not ok:
            bad.append(f"{check} {value:.3g} (bound {bound:.3g})")
    return bad


class PrecisionChecks:
    """Mixin: subclass once per framework (see the module docstring)."""
    framework: str
    modes: tuple[str, ...] = ("eager",)    # the modes the equivalence runs in
    slow_modes: tuple[str, ...] = ("compiled",)
    train_mode = "eager"                   # how the 50-step run is set up
    train_params = "init"                  # GPT-2's init (seed 0), or "o1": the equivalence tests' weights
    train_batch: int | None = None         # rows per batch (None: the tiny preset's)
    train_batches = 4                      # seeded batches (100, 101, ...) taken in turn
    train_slow = False                     # the run compiles: marked slow
    _measured: dict[tuple, dict[str, Any]] = {}

    # -- what a framework supplies -----------------------------------------------------
    def diffusion_grad_reference(self) -> dict[str, np.ndarray]:
        """The UNet's float64 gradient (workloads.diffusion has no numpy gradient)."""
        raise NotImplementedError

    # -- parametrisation -----------------------------------------------------------------
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        names = metafunc.fixturenames
        if "precision" in names:
            slow = self.train_slow and metafunc.function.__name__ == "test_50_training_steps_follow_fp32"
            metafunc.parametrize("precision", [pytest.param(p, marks=[pytest.mark.slow] if slow else [])
                                               for p in tested_precisions(self.framework)])
        if "workload" in names:
            metafunc.parametrize("workload", WORKLOADS)
        if "mode" in names:
            slow = [pytest.mark.slow]
            metafunc.parametrize("mode", [pytest.param(m, id=m, marks=slow if m in self.slow_modes else [])
                                          for m in self.modes])

    # -- running -------------------------------------------------------------------------
    def build(self, workload: str, mode: str, precision: str, params: dict[str, np.ndarray] | None = None):
        fw = frameworks.load(self.framework)
        W = TG if workload == "gpt" else TD
        case = Case(self.framework, workload, None, mode, precision=precision, placement=Placement(DEVICE))
        return fw, fw.build(case, W.CFG, W.PARAMS if params is None else params)

    def measure(self, workload: str, mode: str, precision: str) -> dict[str, Any]:
        """The case's errors against the float64 references (every check's value), and its model."""
        key = (self.framework, workload, mode, precision)
        if key in self._measured:
            return self._measured[key]
        fw, m = self.build(workload, mode, precision)
        a = lambda *xs: tuple(fw.asarray(x, DEVICE) for x in xs)  # noqa: E731
        W = TG.W if workload == "gpt" else TD.W
        ref = references(workload, self)
        method, inputs = W.forward
        err: dict[str, Any] = {"model": m, "forward": rel_err(fw.to_numpy(getattr(m, method)(*a(*inputs))),
                                                              ref["forward"])}
        err["loss"] = abs(float(fw.to_numpy(m.loss(*a(*W.batch)))) - ref["loss"]) / abs(ref["loss"])
        grads = fw.to_numpy(m.grads(*a(*W.batch)))
        cos = grad_cosines(grads, ref["grads"], skip=W.zero_grad)
        worst = min(cos, key=cos.get)
        keys = list(cos)
        flat = lambda g: np.concatenate([np.asarray(g[k], np.float64).ravel() for k in keys])  # noqa: E731
        err.update(grad_cosine=cos[worst], grad_cosine_at=worst,
                   grad_cosine_median=float(np.median(list(cos.values()))),
                   grad_cosine_all=grad_cosines({"all": flat(grads)}, {"all": flat(ref["grads"])})["all"],
                   grads=grads)
        err["grad_fd"], err["grad_fd_at"] = W.grad_fd_err(grads)
        if workload == "gpt":
            prompt = a(TG.PROMPT)[0]
            gen = fw.to_numpy(m.generate(prompt, TG.N_NEW))
            nocache = fw.to_numpy(m.generate(prompt, TG.N_NEW, use_cache=False))
            err.update(gen=gen, gen_same=float(np.mean(gen == ref["gen"])),
                       gen_nocache_same=float(np.mean(nocache == ref["gen"])),
                       gen_cache_same=float(np.mean(gen == nocache)))
        else:
            for name, (meth, ins, kw) in W.extras.items():
                err[name] = rel_err(fw.to_numpy(getattr(m, meth)(*a(*ins), **kw)), ref[name])
        self._measured[key] = err
        return err

    def train_losses(self, precision: str) -> np.ndarray:
        """TRAIN_STEPS AdamW steps of the tiny GPT over the seeded batches in turn (random tokens:
        the loss falls by memorising them)."""
        cfg = TG.CFG
        params = gpt.init_params(cfg, seed=0) if self.train_params == "init" else TG.PARAMS
        fw, m = self.build("gpt", self.train_mode, precision, params)
        batches = [tuple(fw.asarray(x, DEVICE) for x in gpt.make_batch(cfg, self.train_batch or TG.BATCH, seed=100 + i))
                   for i in range(self.train_batches)]
        return np.array([float(fw.to_numpy(m.train_step(*batches[s % len(batches)]))) for s in range(TRAIN_STEPS)])

    # -- the checks ----------------------------------------------------------------------
    def test_every_workload_declares_the_precision(self, precision, workload):
        table = importlib.import_module(f"frameworks.{self.framework}.precision")
        declared = importlib.import_module(f"frameworks.{self.framework}.{workload}").PRECISIONS
        assert precision in declared and declared == tuple(table.COMPUTE), declared

    def test_matches_the_float64_reference(self, precision, workload, mode):
        err = self.measure(workload, mode, precision)
        assert violations(err, precision, self.framework, workload) == [], err
        if workload == "gpt":
            P = TG.PROMPT.shape[1]
            assert err["gen"].shape == (TG.BATCH, P + TG.N_NEW)
            np.testing.assert_array_equal(err["gen"][:, :P], TG.PROMPT)

    def test_50_training_steps_follow_fp32(self, precision):
        ref, low = self.train_losses(DEFAULT), self.train_losses(precision)
        gap = np.abs(low - ref) / ref
        assert np.all(np.isfinite(low))
        assert gap.max() <= tol(precision, self.framework, "gpt", "train50"), (int(gap.argmax()), float(gap.max()))
        drop = tol(precision, self.framework, "gpt", "train_drop")
        assert ref[-1] < drop * ref[0] and low[-1] < drop * low[0]          # both learn
        assert gap.max() > 0                                                # and the policy really differs

    # -- measuring -----------------------------------------------------------------------
    def report(self, modes: tuple[str, ...] | None = None) -> None:
        """Print every measured error (the numbers of docs/measurements/<policy>-<framework>.txt)."""
        for precision in tested_precisions(self.framework):
            for mode in modes or self.modes:
                for workload in WORKLOADS:
                    err = self.measure(workload, mode, precision)
                    print(f"{self.framework} {precision} {mode} {workload}: "
                          + "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in err.items()
                                      if isinstance(v, (float, str, tuple))), flush=True)
            ref, low = self.train_losses(DEFAULT), self.train_losses(precision)
            gap = np.abs(low - ref) / ref
            print(f"train {TRAIN_STEPS} steps ({self.train_mode}): fp32 loss {ref[0]:.4f} -> {ref[-1]:.4f}, "
                  f"{precision} "
                  f"{low[0]:.4f} -> {low[-1]:.4f}, worst |{precision} - fp32| / fp32 {gap.max():.3g} at step "
                  f"{int(gap.argmax())}, mean {gap.mean():.3g}")


_REFS: dict[tuple[str, str], dict[str, Any]] = {}


def references(workload: str, checks: PrecisionChecks) -> dict[str, Any]:
    """The float64 references: the numpy forward, loss and generation, the GPT's numpy
    backpropagation (tests/support/equivalence.reference_gpt_grad), the samplers; the UNet's gradient
    from the framework (diffusion_grad_reference)."""
    key = (workload, checks.framework if workload == "diffusion" else "")
    if key not in _REFS:
        if workload == "gpt":
            _REFS[key] = {"forward": gpt.reference_logits(TG.CFG, TG.PARAMS, TG.TOKENS),
                          "loss": gpt.reference_loss(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS),
                          "grads": E.reference_gpt_grad(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS),
                          "gen": gpt.reference_generate(TG.CFG, TG.PARAMS, TG.PROMPT, TG.N_NEW)}
        else:
            from workloads import diffusion as D
            _REFS[key] = {"forward": D.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T),
                          "loss": D.reference_loss(TD.CFG, TD.PARAMS, TD.X0, TD.T, TD.NOISE),
                          "grads": checks.diffusion_grad_reference(), **TD.reference_samples()}
    return _REFS[key]

