"""workloads.gpt.from_state_dict / load_weights: GPT-2 state dicts as Hugging Face
transformers and nanoGPT write them, built from random weights (nothing is downloaded)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from workloads import gpt
from workloads.base import FwbenchError

CFG = gpt.GPTConfig(block_size=16, vocab_size=50, n_layer=2, n_head=2, n_embd=8)
PARAMS = gpt.init_params(CFG, seed=0)


def hf_state(prefix: str = "transformer.", head: bool = True) -> dict[str, np.ndarray]:
    """GPT2LMHeadModel's state dict: prefixed names, causal-mask buffers, the tied head."""
    out = {prefix + k: v for k, v in PARAMS.items()}
    for i in range(CFG.n_layer):
        out[f"{prefix}h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), np.float32))
        out[f"{prefix}h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    if head:
        out["lm_head.weight"] = PARAMS["wte.weight"].copy()
    return out


def assert_loaded(cfg, params):
    assert cfg == CFG
    assert list(params) == list(PARAMS)
    for k, v in PARAMS.items():
        assert params[k].dtype == np.float32
        np.testing.assert_array_equal(params[k], v, err_msg=k)


@pytest.mark.parametrize("prefix,head", [("transformer.", True), ("", False), ("_orig_mod.transformer.", True)])
def test_hugging_face_state_dicts(prefix, head):
    assert_loaded(*gpt.from_state_dict(hf_state(prefix, head), n_head=2))
    assert_loaded(*gpt.from_state_dict(hf_state(prefix, head), config={"n_head": 2, "n_positions": 16}))


def test_nanogpt_state_dict_with_torch_tensors():
    torch = pytest.importorskip("torch")
    linear = ("c_attn.weight", "c_proj.weight", "c_fc.weight")
    state = {"transformer." + k: torch.from_numpy(v.T.copy() if k.endswith(linear) and v.ndim == 2 else v)
             for k, v in PARAMS.items()}
    state["lm_head.weight"] = state["transformer.wte.weight"]   # nanoGPT's tied head
    assert_loaded(*gpt.from_state_dict(state, n_head=2))


def test_refusals_name_the_problem():
    with pytest.raises(FwbenchError, match="pass n_head="):
        gpt.from_state_dict(hf_state())
    bad = hf_state()
    bad["lm_head.weight"] = bad["lm_head.weight"] + 1
    with pytest.raises(FwbenchError, match="lm_head.weight differs from wte.weight"):
        gpt.from_state_dict(bad, n_head=2)
    bad = hf_state()
    del bad["transformer.h.1.ln_2.bias"]
    with pytest.raises(FwbenchError, match="missing \\['h.1.ln_2.bias'\\]"):
        gpt.from_state_dict(bad, n_head=2)
    with pytest.raises(FwbenchError, match="divisible by n_head"):
        gpt.from_state_dict(hf_state(), n_head=3)
    with pytest.raises(FwbenchError, match="not a GPT-2 state dict"):
        gpt.from_state_dict({"weight": np.zeros(3)}, n_head=2)
    with pytest.raises(FwbenchError, match=".safetensors or .npz"):
        gpt.load_weights("model.bin", n_head=2)


def test_load_npz_with_config_json(tmp_path):
    np.savez(tmp_path / "model.npz", **hf_state())
    assert_loaded(*gpt.load_weights(str(tmp_path / "model.npz"), n_head=2))
    (tmp_path / "config.json").write_text(json.dumps({"n_head": 2, "n_layer": 2}))
    assert_loaded(*gpt.load_weights(str(tmp_path / "model.npz")))


def test_load_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({k: np.ascontiguousarray(v) for k, v in hf_state().items()}, str(tmp_path / "model.safetensors"))
    assert_loaded(*gpt.load_weights(str(tmp_path / "model.safetensors"), n_head=2))


def test_loaded_weights_run_in_a_framework():
    """The loaded params build a model whose logits match the numpy reference."""
    import frameworks
    from tests.support.helpers import INSTALLED
    if not INSTALLED:
        pytest.skip("no framework installed")
    cfg, params = gpt.from_state_dict(hf_state(), n_head=2)
    fw = frameworks.load(INSTALLED[0])
    tokens, _ = gpt.make_batch(cfg, 2, seed=1)
    out = fw.to_numpy(fw.build("gpt", cfg, params, "eager").logits(fw.asarray(tokens, "cpu")))
    np.testing.assert_allclose(out, gpt.reference_logits(cfg, params, tokens), rtol=1e-4, atol=1e-5)
