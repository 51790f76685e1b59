"""Bad sizes (issue 19): every model input that a model cannot compute with is refused with
one FwbenchError line, the same for every framework's arrays, from one rule in `workloads`
(GPTConfig.check_tokens, DiffusionConfig.check_images, DynamicConfig.check_prefill /
check_generate / check_train / check_length, workloads.derivatives.check_*), gathered per method
in each workload's INPUT_RULES and run where inputs are made (`<workload>.check_inputs`: the
harness's input pool, a library user's own inputs), never inside a model's call (a call is what
is timed). Each bad input below is given, as each installed framework's arrays, to the
workload's check_inputs; its message must be the one the rule gives for the same numpy input.
The Python ints a method builds its function from (an order, a length, a model count) are
checked by the method itself, in every framework and mode (test_the_scalars_a_method_checks).

Before the rules: JAX clamped what torch and TensorFlow refused (prefill_int's length -3 gave
length 29's logits, 40 length 32's; a `last` past the prompt read its last position; generate past
the block returned tokens), a batch of 0 crashed deep inside (JAX's decoding with
ZeroDivisionError, torch's and TF's generate, the GPT's per-sample gradients in torch and
TF, TF's UNet), `ensemble_models=()` passed the config and failed in init_params, TF's
nth_derivative(order=-1) recursed without end, `bucket_of` past the block raised a bare
StopIteration, and ensemble_gpt(models=5) with 2 GPTs built returned 2 results."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import frameworks
import workloads
from tests.support.helpers import impls
from workloads import derivatives as DV
from workloads import diffusion as DF
from workloads import dynamic as DY
from workloads import gpt as G
from workloads.base import FwbenchError

GCFG = G.preset("tiny").config
DCFG = DF.preset("tiny").config
YCFG = DY.preset("tiny").config
VCFG = DV.preset("tiny").config
IMPLS = impls()
CONFIGS = {"gpt": GCFG, "diffusion": DCFG, "dynamic": YCFG, "derivatives": VCFG}
_models: dict = {}


def model(workload: str, framework: str, mode: str) -> tuple[Any, Any]:
    """(adapter, model) of a tiny preset, built once per workload, framework and mode."""
    key = (workload, framework, mode)
    if key not in _models:
        adapter = frameworks.load(framework)
        cfg, mod = {"gpt": (GCFG, G), "diffusion": (DCFG, DF), "dynamic": (YCFG, DY),
                    "derivatives": (VCFG, DV)}[workload]
        _models[key] = adapter, adapter.build(workload, cfg, mod.init_params(cfg), mode, "cpu")
    return _models[key]


def message(rule: Callable[..., Any], *args: Any) -> str:
    """What the workload's rule says about these (numpy) inputs: the one line every
    framework must give."""
    with pytest.raises(FwbenchError) as e:
        rule(*args)
    return str(e.value)


TOKENS, TARGETS = G.make_batch(GCFG, 2, seed=0, seq_len=8)
NONE = np.zeros((0, 8), np.int32)
PROMPT = DY.task_spec(YCFG, 1, "prefill").inputs[0][0]              # (1, T) a prefill request
T = PROMPT.shape[1]
PADDED = DY.task_spec(YCFG, 1, "prefill_int").inputs[0][0]         # (1, block_size)
FULL = np.zeros((1, GCFG.block_size), np.int32)
FULL40 = np.zeros((1, GCFG.block_size + 8), np.int32)
W1, B1, W2, B2, X, Y = DV.task_spec(VCFG, 1, "per_sample_grad_mlp_b4").inputs[0]
HVP = DV.task_spec(VCFG, 1, "hvp_mlp").inputs[0]
THETA, HX, HY = DV.task_spec(VCFG, 1, "hessian_p30").inputs[0]
HSIZE = DV.task_spec(VCFG, 1, "hessian_p30").kwargs
POINTS = DV.task_spec(VCFG, 1, "nth_derivative_1").inputs[0][0]
GTOK, GTGT = DV.task_spec(VCFG, 1, "per_sample_grad_gpt_b3").inputs[0]
GHVP = DV.task_spec(VCFG, 1, "hvp_gpt").inputs[0]
BUILT = max(VCFG.ensemble_models)
PAST = np.where(GTOK == GTOK[0, 0], GCFG.vocab_size + 5, GTOK).astype(GTOK.dtype)    # 261 of 256
NEG = np.where(GHVP[1] == GHVP[1][0, 0], -1, GHVP[1]).astype(GHVP[1].dtype)
YBAD = np.where(Y == Y[0], VCFG.classes + 4, Y).astype(Y.dtype)                       # 7 of 3
IMAGES = np.zeros((0, DCFG.image_size, DCFG.image_size, DCFG.in_channels), np.float32)
NO_T = np.zeros((0,), np.int32)


def last(*v: int) -> np.ndarray:
    return np.array(v, np.int32)


# id -> (workload, method, positional inputs (numpy arrays converted, others as they are),
#        keyword arguments, the workload rule and its inputs that give the expected message)
CASES: dict[str, tuple] = {
    # batch 0, everywhere a batch is
    "gpt-logits-batch0": ("gpt", "logits", (NONE,), {}, GCFG.check_tokens, (NONE,)),
    "gpt-train_step-batch0": ("gpt", "train_step", (NONE, NONE), {}, GCFG.check_batch, (NONE, NONE)),
    "gpt-generate-batch0": ("gpt", "generate", (NONE,), {"n_new": 2}, GCFG.check_generate, (NONE, 2)),
    "diffusion-eps-batch0": ("diffusion", "eps", (IMAGES, NO_T), {}, DCFG.check_eps_inputs, (IMAGES, NO_T)),
    "dynamic-prefill-batch0": ("dynamic", "prefill", (PROMPT[:0], last()), {}, YCFG.check_prefill,
                               (PROMPT[:0], last())),
    "dynamic-generate-batch0": ("dynamic", "generate", (PROMPT[:0], last()), {}, YCFG.check_generate,
                                (PROMPT[:0], last())),
    "derivatives-per_sample_grad-batch0": ("derivatives", "per_sample_grad", (W1, B1, W2, B2, X[:0], Y[:0]), {},
                                           DV.check_examples, (X[:0],)),
    "derivatives-hvp-batch0": ("derivatives", "hvp", (*HVP[:8], HVP[8][:0], HVP[9][:0]), {},
                               DV.check_examples, (HVP[8][:0],)),
    "derivatives-per_sample_grad_gpt-batch0": ("derivatives", "per_sample_grad_gpt", (GTOK[:0], GTGT[:0]), {},
                                               DV.check_gpt_batch, (GCFG, GTOK[:0], GTGT[:0])),
    "derivatives-per_sample_grad_gpt-past-block": ("derivatives", "per_sample_grad_gpt", (FULL40, FULL40), {},
                                                   DV.check_gpt_batch, (GCFG, FULL40, FULL40)),
    # positions and lengths out of range
    "dynamic-prefill-last-past": ("dynamic", "prefill", (PROMPT, last(T + 3)), {}, YCFG.check_prefill,
                                  (PROMPT, last(T + 3))),
    "dynamic-prefill-last-negative": ("dynamic", "prefill", (PROMPT, last(-1)), {}, YCFG.check_prefill,
                                      (PROMPT, last(-1))),
    "dynamic-generate-past-block": ("dynamic", "generate", (FULL, last(GCFG.block_size - 1)), {},
                                    YCFG.check_generate, (FULL, last(GCFG.block_size - 1))),
    "dynamic-generate-rows-differ": ("dynamic", "generate", (np.repeat(PROMPT, 2, 0), last(2, 5)), {},
                                     YCFG.check_generate, (np.repeat(PROMPT, 2, 0), last(2, 5))),
    "dynamic-prefill_int-negative": ("dynamic", "prefill_int", (PADDED, -3), {}, YCFG.check_length, (PADDED, -3)),
    "dynamic-prefill_int-past": ("dynamic", "prefill_int", (PADDED, 40), {}, YCFG.check_length, (PADDED, 40)),
    "dynamic-prefill_int-zero": ("dynamic", "prefill_int", (PADDED, 0), {}, YCFG.check_length, (PADDED, 0)),
    "dynamic-train-zero-weights": ("dynamic", "train", (TOKENS, TARGETS, np.zeros(TOKENS.shape, np.float32)), {},
                                   YCFG.check_train, (TOKENS, TARGETS, np.zeros(TOKENS.shape, np.float32))),
    "dynamic-train-weights-shape": ("dynamic", "train", (TOKENS, TARGETS, np.ones((2, 3), np.float32)), {},
                                    YCFG.check_train, (TOKENS, TARGETS, np.ones((2, 3), np.float32))),
    # orders, model counts and mismatched sizes
    "derivatives-nth-order-negative": ("derivatives", "nth_derivative", (POINTS,), {"order": -1},
                                       DV.check_order, (-1,)),
    "derivatives-nth-order-zero": ("derivatives", "nth_derivative", (POINTS,), {"order": 0}, DV.check_order, (0,)),
    "derivatives-ensemble-past-built": ("derivatives", "ensemble_gpt", (GTOK,), {"models": BUILT + 3},
                                        DV.check_ensemble, (GCFG, GTOK, BUILT + 3, BUILT)),
    "derivatives-ensemble-zero": ("derivatives", "ensemble_gpt", (GTOK,), {"models": 0},
                                  DV.check_ensemble, (GCFG, GTOK, 0, BUILT)),
    "derivatives-hessian-theta-length": ("derivatives", "hessian", (THETA[:-1], HX, HY), HSIZE,
                                         DV.check_hessian, (THETA[:-1], HX, HSIZE["hidden"], HSIZE["classes"])),
    "derivatives-hvp_gpt-tangents-missing": ("derivatives", "hvp_gpt", GHVP[:-1], {},
                                             DV.check_gpt_hvp, (GCFG, GHVP[0], GHVP[1], GHVP[2:-1])),
    # values (issue 32): read where the inputs are made, outside the timed calls; before,
    # JAX and TF XLA gave id vocab-1's result for ids past the vocabulary, and NaN (TF XLA) or
    # finite wrong numbers (JAX) for labels past the classes
    "derivatives-per_sample_grad_gpt-id-past-vocab": ("derivatives", "per_sample_grad_gpt", (PAST, GTGT), {},
                                                      GCFG.check_batch, (PAST, GTGT)),
    "derivatives-hvp_gpt-negative-target": ("derivatives", "hvp_gpt", (GHVP[0], NEG, *GHVP[2:]), {},
                                            GCFG.check_batch, (GHVP[0], NEG)),
    "derivatives-ensemble-id-past-vocab": ("derivatives", "ensemble_gpt", (PAST,), {"models": 1},
                                           GCFG.check_tokens, (PAST,)),
    "derivatives-per_sample_grad-label-past-classes": ("derivatives", "per_sample_grad", (W1, B1, W2, B2, X, YBAD),
                                                       {}, DV.check_labels, (YBAD, VCFG.classes)),
    "derivatives-hvp-negative-label": ("derivatives", "hvp", (*HVP[:9], -HVP[9] - 1), {},
                                       DV.check_labels, (-HVP[9] - 1, VCFG.classes)),
    "derivatives-hessian-label-past-classes": ("derivatives", "hessian", (THETA, HX, HY + HSIZE["classes"]), HSIZE,
                                               DV.check_labels, (HY + HSIZE["classes"], HSIZE["classes"])),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("framework", [p.values[0] for p in IMPLS if p.values[1] == "eager"])
def test_each_bad_input_is_one_line_the_same_for_every_frameworks_arrays(framework, case):
    workload, method, args, kwargs, rule, rule_args = CASES[case]
    want = message(rule, *rule_args)
    adapter = frameworks.load(framework)
    x = tuple(adapter.asarray(a, "cpu") if isinstance(a, np.ndarray) else a for a in args)
    with pytest.raises(FwbenchError) as e:
        workloads.get(workload).check_inputs(CONFIGS[workload], method, *x, **kwargs)
    assert str(e.value) == want and "\n" not in want, (str(e.value), want)
    assert type(e.value) is FwbenchError        # not a framework's Unsupported or a wrapped error


# The cases whose bad value is a Python int the method builds its function from: the method
# refuses it itself, in every framework and mode, with the rule's message.
SCALAR_CASES = ("dynamic-prefill_int-negative", "dynamic-prefill_int-past", "dynamic-prefill_int-zero",
                "derivatives-nth-order-negative", "derivatives-nth-order-zero",
                "derivatives-ensemble-past-built", "derivatives-ensemble-zero")


@pytest.mark.parametrize("case", SCALAR_CASES)
@pytest.mark.parametrize("framework,mode", IMPLS)
def test_the_scalars_a_method_checks(framework, mode, case):
    workload, method, args, kwargs, rule, rule_args = CASES[case]
    want = message(rule, *rule_args)
    adapter, m = model(workload, framework, mode)
    x = tuple(adapter.asarray(a, "cpu") if isinstance(a, np.ndarray) else a for a in args)
    with pytest.raises(FwbenchError) as e:
        getattr(m, method)(*x, **kwargs)
    assert str(e.value) == want and type(e.value) is FwbenchError, (str(e.value), want)


def test_configs_and_helpers_refuse_with_one_line():
    with pytest.raises(FwbenchError, match="ensemble_models must list at least one K"):
        DV.DerivativesConfig(ensemble_models=())
    for length in (0, GCFG.block_size + 1):
        with pytest.raises(FwbenchError, match=r"must be in 1\.\.block_size \(32\): the buckets are 8, 16, 32"):
            DY.bucket_of(YCFG, length)
    assert DY.bucket_of(YCFG, GCFG.block_size) == GCFG.block_size and DY.bucket_of(YCFG, 9) == 16
    for order in (True, 2.0, "3"):
        with pytest.raises(FwbenchError, match="order must be a positive integer"):
            DV.check_order(order)


def test_the_rules_accept_every_request_the_workloads_make():
    """No rule refuses what the harness passes: every request of the tiny streams and every
    tiny derivatives task, through the workload's check_inputs as the harness runs it."""
    for task in DY.TASKS:
        for strategy in (None, "bucketed") if task != "prefill_int" else (None,):
            spec = DY.task_spec(YCFG, 1, task, strategy=strategy)
            for args in spec.inputs:
                DY.check_inputs(YCFG, spec.method, *args, **spec.kwargs)
    for task in DV.tasks(VCFG):
        spec = DV.task_spec(VCFG, 1, task)
        for args in spec.inputs:
            DV.check_inputs(VCFG, spec.method, *args, **spec.kwargs)


def test_a_method_without_a_rule_or_with_the_wrong_arguments_is_one_line():
    with pytest.raises(FwbenchError, match=r"no input rule for method 'logit' \(methods with rules: logits, "):
        G.check_inputs(GCFG, "logit", TOKENS)
    with pytest.raises(FwbenchError, match=r"^loss takes \(cfg, tokens, targets\) after the config: "):
        G.check_inputs(GCFG, "loss", TOKENS)
