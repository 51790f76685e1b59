"""fwbench leaves no process-wide precision behind (issue 31, point 4): a case run through the
harness sets its float32 matmul precision (highest: no TF32) for the case only; code outside
fwbench in the same process finds JAX's, torch's and TensorFlow's global settings as it left
them. And the attention each framework's layers run, by device and precision (point 3)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import frameworks
from frameworks import harness
from workloads import record as record_mod
from workloads.case import Case

pytestmark = [pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"),
              pytest.mark.usefixtures("frozen_heap")]     # cases run in the worker (conftest)


def _torch():
    import torch
    backends = (torch.backends, torch.backends.cuda.matmul, torch.backends.cudnn, torch.backends.mkldnn.matmul)
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):   # torch < 2.9: the legacy flags
        return (lambda: (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
                         torch.backends.cudnn.allow_tf32),
                lambda: torch.set_float32_matmul_precision("medium"))       # not fwbench's "highest"

    def legacy():                           # torch.export reads these: they must stay readable
        try:
            return torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
        except RuntimeError as e:           # the two APIs were left in disagreement
            return str(e).splitlines()[0]

    return (lambda: (legacy(), tuple(b.fp32_precision for b in backends)),
            lambda: torch.set_float32_matmul_precision("medium"))


def _jax():
    import jax
    return (lambda: jax.config.jax_default_matmul_precision,
            lambda: jax.config.update("jax_default_matmul_precision", "bfloat16"))


def _tensorflow():
    import tensorflow as tf
    return (lambda: tf.config.experimental.tensor_float_32_execution_enabled(),
            lambda: tf.config.experimental.enable_tensor_float_32_execution(True))


SETTINGS = {"torch": _torch, "jax": _jax, "tensorflow": _tensorflow}


@pytest.fixture(autouse=True)
def process_settings_put_back(request):
    """A test here sets a user's own precision and leaves it: the process's is put back after it,
    or every later test of its worker runs at the user's (found in the suite: torch at 'medium',
    which moves a float32 UNet forward's error, and JAX at a bfloat16 default matmul precision)."""
    framework = getattr(request.node, "callspec", None) and request.node.callspec.params.get("framework")
    if framework not in SETTINGS:
        yield
        return
    pytest.importorskip(framework)
    read, adapter = SETTINGS[framework]()[0], frameworks.load(framework)
    before, state = read(), adapter.global_precision()      # the adapter's own pair, checked by this file's read
    yield
    adapter.set_global_precision(state)
    assert read() == before, "the process's own precision was not put back"


@pytest.mark.parametrize("framework", list(SETTINGS))
def test_a_case_leaves_the_global_matmul_settings_as_it_found_them(framework, benchmark, monkeypatch):
    pytest.importorskip(framework)
    read, set_users_own = SETTINGS[framework]()
    set_users_own()                         # a user's own setting, which fwbench's case must not keep
    before = read()
    adapter = frameworks.load(framework)
    during = []
    real = type(adapter).case_caches

    def spy(self, role):                    # read inside the case, after configure()
        during.append(read())
        return real(self, role)

    monkeypatch.setattr(type(adapter), "case_caches", spy)
    s = harness.Session(harness.Options(frameworks=(framework,), workloads=("gpt",), preset="tiny", rounds=1),
                        gemm_samples=[{"numpy": 1e9}])
    rec = harness.run_case(benchmark, s, Case(framework, "gpt", "forward", "eager"))
    after = read()
    assert record_mod.problems(rec) == [] and rec["status"] == "ok", rec["reason"]
    assert rec["matmul_precision"] == "highest"
    assert during and during[0] != before, "the case did not run at fwbench's own precision"
    assert after == before


GPT_CLASS = {"torch": "TorchGPT", "jax": "JaxGPT", "tensorflow": "TFGPT"}


@pytest.mark.parametrize("framework", list(SETTINGS))
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_the_library_api_leaves_the_global_matmul_settings_as_it_found_them(framework, mode, monkeypatch):
    """A library user (README, "Use as a library"): configure(), build() and the model's calls
    leave the process's float32 settings as the user set them. A call runs at fwbench's
    precision ('highest': no TF32, as a harness case sees it) inside `with
    adapter.own_precision()`, and at the process's own settings outside one: the model's methods
    never set it themselves (a call is what is timed, issue 38)."""
    pytest.importorskip(framework)
    from workloads import gpt
    read, set_users_own = SETTINGS[framework]()
    adapter = frameworks.load(framework)
    if mode not in adapter.modes:
        mode = adapter.modes[-1]
    set_users_own()
    before = read()
    module = importlib.import_module(f"frameworks.{framework}.gpt")
    cls = getattr(module, GPT_CLASS[framework])
    during = []
    real = cls.logits

    def probe(self, tokens):                # inside fwbench's call, before the model computes
        during.append(read())
        return real(self, tokens)

    monkeypatch.setattr(cls, "logits", probe)
    adapter.configure(matmul_precision="highest")
    assert read() == before, "configure() changed the process's settings"
    cfg = gpt.preset("tiny").config
    model = adapter.build("gpt", cfg, gpt.init_params(cfg, seed=0), mode=mode, device="cpu")
    assert isinstance(model, cls) and read() == before, "build() changed the process's settings"
    x, _ = gpt.make_batch(cfg, batch=1, seed=0)
    out = adapter.to_numpy(model.logits(adapter.asarray(x, "cpu")))
    assert np.isfinite(out).all() and read() == before, "a model call changed the process's settings"
    with adapter.own_precision():           # what fwbench's calls run at, as the harness's case sees it
        fwbench = read()
        model.logits(adapter.asarray(x, "cpu"))
        with adapter.own_precision():       # nested: nothing changes, nor on its exit
            pass
        assert read() == fwbench
    assert during == [before, fwbench] and fwbench != before, (during, fwbench, before)
    assert read() == before
    adapter.own_precision().__enter__()     # entered without a `with` and dropped: in force until an
    import gc  # __exit__ (a generator's would close when collected)
    gc.collect()
    assert read() == fwbench
    adapter.own_precision().__exit__(None, None, None)
    assert read() == before


# ----------------------------------------------------------------------------- the attention per backend

XLA = "jax.nn.dot_product_attention (XLA)"
# framework -> (device, precision) -> the attention its layers run (the report's table, issue 31)
ATTENTION = {
    "torch": {("cpu", "fp32"): "sdpa", ("cuda", "fp32"): "sdpa", ("cuda:0", "fp32"): "sdpa",
              ("cpu", "bf16"): "written", ("cuda", "bf16"): "sdpa", ("cuda:1", "bf16"): "sdpa"},
    "jax": {("cpu", "fp32"): XLA, ("gpu", "fp32"): XLA, ("cpu", "bf16"): "written"},   # gpu bf16: below
    "tensorflow": {(d, p): "written" for d in ("cpu", "gpu") for p in ("fp32", "bf16")},
}


@pytest.mark.parametrize("framework", list(ATTENTION))
def test_the_attention_choice_by_device_and_precision(framework):
    pytest.importorskip(framework)
    P = importlib.import_module(f"frameworks.{framework}.precision")
    assert {key: P.attention_impl(*key) for key in ATTENTION[framework]} == ATTENTION[framework]
    with pytest.raises(KeyError):
        P.attention_impl("cpu", "fp8")


def test_torch_bf16_sdpa_keeps_the_policy_where_chosen():
    """What the CUDA choice runs, run here on the CPU's fused kernel: bf16 inputs, float32 out,
    within bf16's error of the float64 attention, and no farther from it than the written-out
    form (its scores and softmax float32)."""
    torch = pytest.importorskip("torch")
    from torch.nn import functional as F

    from frameworks.torch import precision as P
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 16, generator=g) for _ in range(3))
    s = 16 ** -0.5
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    a = (q.double() @ k.double().transpose(-2, -1) * s).masked_fill(~mask, float("-inf"))
    ref = (torch.softmax(a, -1) @ v.double()).numpy()
    bf = torch.bfloat16
    fused = F.scaled_dot_product_attention(q.to(bf), k.to(bf), v.to(bf), is_causal=True, scale=s).float()
    written = P.written_attention(q, k, v, mask, s, bf)
    e_fused, e_written = (float(np.abs(x.numpy() - ref).max()) for x in (fused, written))
    assert e_fused < 2 ** -6 and e_fused <= e_written, (e_fused, e_written)


def test_torch_attention_follows_its_choice(monkeypatch):
    """attention() runs what attention_impl chose: the CUDA choice (sdpa at bf16) run on the
    CPU by patching the choice, against the written-out form the CPU's choice runs."""
    torch = pytest.importorskip("torch")
    from torch.nn import functional as F

    from frameworks.torch import precision as P
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 8, 4, generator=g) for _ in range(3))
    bf = torch.bfloat16
    fused = F.scaled_dot_product_attention(q.to(bf), k.to(bf), v.to(bf), is_causal=True, scale=0.5).float()
    written = P.written_attention(q, k, v, torch.ones(8, 8, dtype=torch.bool).tril(), 0.5, bf)
    assert not torch.equal(fused, written)                       # the two forms tell apart
    assert torch.equal(P.attention(q, k, v, 0.5, bf, causal=True), written)           # the CPU's choice
    monkeypatch.setattr(P, "attention_impl", lambda device, precision: P.SDPA)
    out = P.attention(q, k, v, 0.5, bf, causal=True)
    assert out.dtype == torch.float32 and torch.equal(out, fused)                     # the CUDA choice


# ----------------------------------------------------------------------------- JAX: cuDNN at bf16 on a GPU

def _jax_qkv(B=2, T=16, nh=2, hs=8, seed=3):
    import jax.numpy as jnp
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((B, T, nh, hs), dtype=np.float32)) for _ in range(3))


def test_jax_on_a_gpu_without_cudnn_writes_the_attention_out_and_says_why(monkeypatch):
    pytest.importorskip("jax")
    from frameworks.jax import precision as P
    monkeypatch.setattr(P, "_CUDNN", {})
    monkeypatch.setattr(P, "_cudnn_probe", lambda *a: "no CUDA GPU in this process")
    for device in ("gpu", "cuda", "cuda:0"):
        assert P.attention_impl(device, "bf16") == "written (cuDNN not used: no CUDA GPU in this process)"
    assert P.attention_impl("cpu", "bf16") == "written" and P.attention_impl("gpu", "fp32") == XLA
    q, k, v = _jax_qkv()
    import jax.numpy as jnp
    mask = jnp.tril(jnp.ones((16, 16), bool))
    assert np.array_equal(P.attention(q, k, v, 0.5, jnp.bfloat16, causal=True),
                          P.written_attention(q, k, v, 0.5, jnp.bfloat16, mask))


def test_jax_on_this_machine_cudnn_is_refused_unless_a_cuda_gpu_is_here():
    """The real check, unpatched: on a machine without a CUDA GPU (this one in CI) it refuses
    with the reason; on one with a GPU whose cuDNN compiles the flash kernel, it picks cuDNN."""
    jax = pytest.importorskip("jax")
    from frameworks.jax import precision as P
    try:
        has_gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        has_gpu = False
    got = P.attention_impl("gpu", "bf16")
    if has_gpu:
        assert got.startswith(P.CUDNN_ATTENTION) or got.startswith("written (cuDNN not used: "), got
    else:
        assert got == "written (cuDNN not used: no CUDA GPU in this process)"


def test_jax_picks_cudnn_where_it_is_available(monkeypatch):
    """With cuDNN available (the check patched), attention_impl names cuDNN, the attention stages
    the cuDNN call for CUDA (lax.platform_dependent) with q, k, v in bf16, the decode path with
    the keys each sequence sees, and a program run on the CPU still takes the written form; a
    shape cuDNN refused is named and runs written out."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from frameworks.jax import precision as P
    monkeypatch.setattr(P, "_CUDNN", {})
    refuse = {("decode", 1, 16, 2, 8): "NotImplementedError: the head dim must be a multiple of 8"}
    monkeypatch.setattr(P, "_cudnn_probe", lambda compute, *shape: refuse.get(shape))
    calls = []

    def fake_cudnn(q, k, v, seen, scale, causal):       # traced for the CUDA branch only
        calls.append(([str(t.dtype) for t in (q, k, v)], None if seen is None else str(seen.dtype), causal))
        return (q.astype(jnp.float32) + 7.0)[..., :v.shape[-1]]

    monkeypatch.setattr(P, "_cudnn_call", fake_cudnn)
    assert P.attention_impl("gpu", "bf16") == P.CUDNN_ATTENTION
    q, k, v = _jax_qkv()
    mask = jnp.tril(jnp.ones((16, 16), bool))
    out = jax.jit(lambda q, k, v: P.attention(q, k, v, 0.5, jnp.bfloat16, causal=True))(q, k, v)
    assert calls == [(["bfloat16"] * 3, None, True)]
    assert np.array_equal(out, P.written_attention(q, k, v, 0.5, jnp.bfloat16, mask))   # the CPU's branch
    jaxpr = str(jax.make_jaxpr(lambda q, k, v: P.attention(q, k, v, 0.5, jnp.bfloat16, causal=True))(q, k, v))
    assert "platform_index" in jaxpr and "cuda" in jaxpr
    g = jax.grad(lambda q: P.attention(q, k, v, 0.5, jnp.bfloat16, causal=True).sum())(q)   # differentiable
    assert g.dtype == jnp.float32 and bool(jnp.isfinite(g).all())
    # decoding with caches (B, nh, S, hs): that shape class refused here, so it runs written out, named
    kc, vc = (t.swapaxes(1, 2) for t in (k, v))
    calls.clear()
    out = P.attention(q[:, :1], kc, vc, 0.5, jnp.bfloat16, pos=5)
    assert calls == []
    ref = P.written_attention(q[:, :1], kc, vc, 0.5, jnp.bfloat16, jnp.arange(16) <= 5, kv_layout="bnsh")
    assert np.array_equal(out, ref)
    assert P.attention_impl("cuda", "bf16") == (
        f"{P.CUDNN_ATTENTION}; written where cuDNN refused "
        "(decode T=1 S=16 heads=2 head size=8: NotImplementedError: the head dim must be a multiple of 8)")
    refuse.clear()                                       # a decode shape cuDNN takes: the keys seen passed
    monkeypatch.setattr(P, "_CUDNN", {})
    jax.jit(lambda q, k, v: P.attention(q, k, v, 0.5, jnp.bfloat16, pos=5))(q[:, :1], kc, vc)
    assert calls == [(["bfloat16"] * 3, "int32", False)]
