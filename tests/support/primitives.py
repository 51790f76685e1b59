"""Each framework's primitives, the functions its models call (frameworks/<fw>/gpt.py and
diffusion.py), against numpy float64 on inputs well away from any linear range: GELU over
[-8, 8], LayerNorm and GroupNorm on rows/groups whose spread runs from 1e-3 to 1e2 (so the
eps matters), causal attention with O(1) scores, softmax cross-entropy on O(3) logits, the
timestep embedding at every timestep. `primitive_errors` returns the relative errors."""
from __future__ import annotations

import importlib
import math

import numpy as np

import frameworks
from workloads import diffusion as D
from workloads import gpt
from workloads.base import rel_err

# the layout of causal_attention's q, k, v where it is not (B, nh, T, hs)
ATTENTION_BTHD = {"jax"}


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    spread = np.logspace(-3, 2, 16)                                        # per row / group std
    x = np.concatenate([np.linspace(-8, 8, 1601), 3 * rng.standard_normal(400)])
    # means of the order of the spread: with |mean| >> std, torch's CPU GroupNorm (E[x^2] -
    # E[x]^2) loses precision to cancellation (1e-2 at |mean|/std = 1e3), a float32 limit
    # rather than a wrong model
    v = {
        "gelu_x": x,
        "ln_x": (rng.standard_normal((16, 64)) + rng.standard_normal((16, 1))) * spread[:, None],
        "ln_w": 1 + 0.1 * rng.standard_normal(64), "ln_b": 0.1 * rng.standard_normal(64),
        "att_qkv": rng.standard_normal((3, 2, 4, 12, 16)),                 # (3, B, nh, T, hs)
        "ce_logits": 3 * rng.standard_normal((40, 50)), "ce_targets": rng.integers(0, 50, 40),
        # 2 images, 8 groups of 4 channels; image i, group g has std spread[8 i + g]
        "gn_x": ((rng.standard_normal((2, 4, 4, 8, 4)) + rng.standard_normal((2, 1, 1, 8, 1)))
                 * spread.reshape(2, 1, 1, 8, 1)).reshape(2, 4, 4, 32),
        "gn_w": 1 + 0.1 * rng.standard_normal(32), "gn_b": 0.1 * rng.standard_normal(32),
        "t": np.arange(0, 1000, 37).astype(np.int32),
    }
    # the references see exactly the float32 values the frameworks get
    return {k: a.astype(np.float32).astype(np.float64) if a.dtype == np.float64 else a for k, a in v.items()}


def _references(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    q, k, vv = v["att_qkv"]
    T, hs = q.shape[2], q.shape[3]
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    z = v["ce_logits"] - v["ce_logits"].max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return {
        "gelu": gpt.gelu_tanh(v["gelu_x"]),
        "layer_norm": gpt._layer_norm(v["ln_x"], v["ln_w"], v["ln_b"]),
        "causal_attention": (a / a.sum(-1, keepdims=True)) @ vv,
        "cross_entropy": np.array(-logp[np.arange(len(logp)), v["ce_targets"]].mean()),
        "group_norm": D._group_norm({"n.weight": v["gn_w"], "n.bias": v["gn_b"]}, "n", v["gn_x"], 8),
        "timestep_embedding": D.timestep_embedding(v["t"], 64),
    }


INPUTS = _inputs()
REFERENCES = _references(INPUTS)


def primitive_errors(name: str) -> dict[str, float]:
    """Relative error of each primitive of framework `name` against numpy float64."""
    fw = frameworks.load(name)
    g = importlib.import_module(f"frameworks.{name}.gpt")
    d = importlib.import_module(f"frameworks.{name}.diffusion")
    f32 = lambda a: fw.asarray(np.asarray(a, np.float32), "cpu")  # noqa: E731
    v, out = INPUTS, {}
    out["gelu"] = g.gelu(f32(v["gelu_x"]))
    out["layer_norm"] = g.layer_norm(f32(v["ln_x"]), f32(v["ln_w"]), f32(v["ln_b"]))
    qkv = v["att_qkv"].transpose(0, 1, 3, 2, 4) if name in ATTENTION_BTHD else v["att_qkv"]
    att = fw.to_numpy(g.causal_attention(*(f32(a) for a in qkv)))
    out["causal_attention"] = att.transpose(0, 2, 1, 3) if name in ATTENTION_BTHD else att
    out["cross_entropy"] = g.cross_entropy(f32(v["ce_logits"]), fw.asarray(v["ce_targets"].astype(np.int32), "cpu"))
    nchw = getattr(d, "IMAGE_LAYOUT", "NHWC") == "NCHW"
    x = v["gn_x"].transpose(0, 3, 1, 2) if nchw else v["gn_x"]
    gn = fw.to_numpy(d.group_norm(f32(x), f32(v["gn_w"]), f32(v["gn_b"]), 8))
    out["group_norm"] = gn.transpose(0, 2, 3, 1) if nchw else gn
    out["timestep_embedding"] = d.timestep_embedding(fw.asarray(v["t"], "cpu"),
                                                     f32(D.timestep_frequencies(64)))
    return {k: rel_err(np.asarray(fw.to_numpy(o), np.float64), REFERENCES[k]) for k, o in out.items()}
