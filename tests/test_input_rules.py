"""The same input rules (workloads.gpt.GPTConfig.check_*, workloads.diffusion.DiffusionConfig
.check_*) for every public method and every framework's arrays, with the same one-line message:
each workload's check_inputs, run where inputs are made (the harness's pool; a library user's
inputs), never inside a call. A method checks only its own Python ints (generate's n_new, the
sampler's method and steps), in every framework and mode."""
from __future__ import annotations

import numpy as np
import pytest

import frameworks
from tests.support.helpers import impls
from workloads import diffusion as D
from workloads import gpt
from workloads.base import FwbenchError

GCFG = gpt.preset("tiny").config
DCFG = D.preset("tiny").config
IMPLS = impls()
_models: dict = {}


def model(workload: str, name: str, mode: str):
    key = (workload, name, mode)
    if key not in _models:
        import frameworks
        fw = frameworks.load(name)
        cfg = GCFG if workload == "gpt" else DCFG
        params = (gpt if workload == "gpt" else D).init_params(cfg, seed=0)
        _models[key] = fw, fw.build(workload, cfg, params, mode, "cpu")
    return _models[key]


TOKENS, TARGETS = gpt.make_batch(GCFG, 2, seed=0, seq_len=8)
BAD_TOKENS = {
    "float": TOKENS.astype(np.float32),
    "negative": np.where(TOKENS == TOKENS[0, 0], -1, TOKENS).astype(np.int32),
    "too_large": np.full_like(TOKENS, GCFG.vocab_size),
    "too_long": np.zeros((2, GCFG.block_size + 1), np.int32),
    "one_dim": TOKENS[0],
}


def expected(check, *args) -> str:
    with pytest.raises(FwbenchError) as e:
        check(*args)
    return str(e.value)


FRAMEWORKS = [p.values[0] for p in IMPLS if p.values[1] == "eager"]


def refused(name: str, workload: str, call: str, *args, **kwargs) -> str:
    """check_inputs' one line for `args` as framework `name`'s arrays, for the model method `call`."""
    fw = frameworks.load(name)
    x = tuple(fw.asarray(a, "cpu") if isinstance(a, np.ndarray) else a for a in args)
    mod, cfg = (gpt, GCFG) if workload == "gpt" else (D, DCFG)
    with pytest.raises(FwbenchError) as e:
        mod.check_inputs(cfg, call, *x, **kwargs)
    assert type(e.value) is FwbenchError and "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("kind", BAD_TOKENS)
@pytest.mark.parametrize("method", ["logits", "loss", "grads", "train_step", "generate"])
@pytest.mark.parametrize("name", FRAMEWORKS)
def test_bad_tokens_one_message_everywhere(name, method, kind):
    bad = BAD_TOKENS[kind]
    if method == "logits":
        args, want, kw = (bad,), expected(GCFG.check_tokens, bad), {}
    elif method == "generate":
        args, want, kw = (bad,), expected(GCFG.check_generate, bad, 1), {"n_new": 1}
    else:
        targets = TARGETS if bad.shape == TOKENS.shape else bad
        args, want, kw = (bad, targets), expected(GCFG.check_batch, bad, targets), {}
    assert refused(name, "gpt", method, *args, **kw) == want


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_bad_targets_one_message_everywhere(name):
    for targets in (np.full_like(TARGETS, -3), TARGETS[:, :4], TARGETS.astype(np.float32)):
        assert refused(name, "gpt", "loss", TOKENS, targets) == expected(GCFG.check_batch, TOKENS, targets)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_generation_bounds_are_generates_own_check(name, mode):
    """n_new, a Python int past the block or negative, is refused by generate itself (JAX's
    decoding would clamp it), the same line as the rule's."""
    fw, m = model("gpt", name, mode)
    tok = fw.asarray(TOKENS, "cpu")
    for n_new in (-1, GCFG.block_size, 2.5):
        with pytest.raises(FwbenchError) as e:
            m.generate(tok, n_new)
        assert str(e.value) == expected(GCFG.check_generate, TOKENS, n_new)
        assert refused(name, "gpt", "generate", TOKENS, n_new) == str(e.value)


@pytest.mark.parametrize("name,mode", [p for p in IMPLS if p.values[:2] != ("torch", "compiled")])
def test_int64_prompts_generate_like_int32(name, mode):
    fw, m = model("gpt", name, mode)
    prompt = TOKENS[:, :3]
    out32 = fw.to_numpy(m.generate(fw.asarray(prompt, "cpu"), 3))
    out64 = fw.to_numpy(m.generate(fw.asarray(prompt.astype(np.int64), "cpu"), 3))
    np.testing.assert_array_equal(out32, out64)


X0, T, NOISE = D.make_train_batch(DCFG, 2, seed=0)
BAD_DIFFUSION = {
    "nchw": (np.moveaxis(X0, 3, 1).copy(), T, NOISE),
    "float16": (X0.astype(np.float16), T, NOISE),
    "t_range": (X0, np.array([0, DCFG.schedule.num_timesteps], np.int32), NOISE),
    "t_negative": (X0, np.array([-1, 0], np.int32), NOISE),
    "t_float": (X0, T.astype(np.float32), NOISE),
    "t_shape": (X0, T[:1], NOISE),
    "noise_shape": (X0, T, NOISE[:1]),
}


@pytest.mark.parametrize("kind", BAD_DIFFUSION)
@pytest.mark.parametrize("method", ["eps", "loss", "grads", "train_step"])
@pytest.mark.parametrize("name", FRAMEWORKS)
def test_bad_diffusion_inputs_one_message_everywhere(name, method, kind):
    if method == "eps" and kind == "noise_shape":
        pytest.skip("eps takes no noise")
    args = BAD_DIFFUSION[kind]
    if method == "eps":
        args, want = args[:2], expected(DCFG.check_eps_inputs, *args[:2])
    else:
        want = expected(DCFG.check_batch, *args)
    assert refused(name, "diffusion", method, *args) == want


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_bad_sampler_inputs_one_message_everywhere(name):
    x_T = D.make_noise(DCFG, (2,), seed=1)
    cases = [(x_T.astype(np.float16), None, "ddim", 2), (x_T, None, "ddpm", 2),
             (x_T, np.zeros((3, *x_T.shape), np.float32), "ddpm", 2), (x_T, None, "plms", 2),
             (x_T, None, "ddim", 0)]
    for x, noise, method, steps in cases:
        assert refused(name, "diffusion", "sample", x, noise, method=method, steps=steps) == \
            expected(DCFG.check_sample, x, noise, method, steps)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_the_sampler_refuses_an_unknown_method_or_step_count_itself(name, mode):
    """sample's own Python arguments (sampler and steps): refused by the sampler itself."""
    fw, m = model("diffusion", name, mode)
    x_T = D.make_noise(DCFG, (2,), seed=1)
    for method, steps in (("plms", 2), ("ddim", 0)):
        with pytest.raises(FwbenchError) as e:
            m.sample(fw.asarray(x_T, "cpu"), None, method=method, steps=steps)
        assert str(e.value) == expected(DCFG.check_sample, x_T, None, method, steps)
