"""The GPT is the same function in every framework and mode (tests/equivalence.py says how).

GPT-specific: greedy generation with the KV cache equals generation without it and the
numpy reference, token for token.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.equivalence import Workload
from tests.helpers import impls, non_eager, o1_params
from workloads import gpt

CFG = gpt.preset("tiny").config
BATCH = gpt.preset("tiny").batch
PARAMS = o1_params(gpt.init_params(CFG, seed=0))
TOKENS, TARGETS = gpt.make_batch(CFG, BATCH, seed=3)
PROMPT = TOKENS[:, :5].copy()
N_NEW = 10


def workload(cfg=CFG, params=PARAMS, tokens=TOKENS, targets=TARGETS, prompt=PROMPT) -> Workload:
    return Workload("gpt", cfg, params, forward=("logits", (tokens,)), batch=(tokens, targets),
                    optimizer=gpt.OPTIMIZER, decayed=gpt.decayed,
                    ref_loss=lambda p: gpt.reference_loss(cfg, p, tokens, targets),
                    extras={"gen": ("generate", (prompt,), {"n_new": N_NEW}),
                            "gen_nocache": ("generate", (prompt,), {"n_new": N_NEW, "use_cache": False})})


W = workload()
IMPLS = impls()


@pytest.fixture(scope="module")
def ref() -> dict:
    return {"logits": gpt.reference_logits(CFG, PARAMS, TOKENS),
            "loss": gpt.reference_loss(CFG, PARAMS, TOKENS, TARGETS),
            "gen": gpt.reference_generate(CFG, PARAMS, PROMPT, N_NEW)}


@pytest.mark.parametrize("name,mode", IMPLS)
def test_export_round_trips_exactly(name, mode):
    W.check_export(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_logits_and_loss_match_reference(name, mode, ref):
    W.check_forward_and_loss(name, mode, ref["logits"], ref["loss"])


@pytest.mark.parametrize("name,mode", IMPLS)
def test_grads_match_finite_differences(name, mode):
    W.check_grads(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_adamw_steps_match_numpy_adamw_on_own_grads(name, mode):
    W.check_adamw(name, mode)


@pytest.mark.parametrize("name,mode", IMPLS)
def test_generation_is_greedy_and_cache_exact(name, mode, ref):
    out = W.run(name, mode)
    assert out["gen"].shape == (BATCH, PROMPT.shape[1] + N_NEW)
    np.testing.assert_array_equal(out["gen"][:, :PROMPT.shape[1]], PROMPT)
    np.testing.assert_array_equal(out["gen"], out["gen_nocache"])
    np.testing.assert_array_equal(out["gen"], ref["gen"])


@pytest.mark.parametrize("name,mode", IMPLS)
def test_loss_falls_on_one_batch(name, mode):
    W.check_loss_falls(name, mode)


@pytest.mark.parametrize("name,mode", non_eager(IMPLS))
def test_mode_agrees_with_eager_of_same_framework(name, mode):
    W.check_agrees_with_eager(name, mode)
