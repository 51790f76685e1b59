"""The registry, the configs and the option parsing refuse bad input with one clear line."""
from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import frameworks
import workloads
from frameworks.base import FrameworkUnavailable
from workloads import gpt
from workloads import record as record_mod
from workloads.base import FwbenchError, adamw_reference, rel_err, replace_config, split_names


def test_importing_fwbench_imports_no_framework():
    code = ("import sys, frameworks, workloads, workloads.gpt, frameworks.harness, frameworks.pytest_plugin;"
            "print(sorted(m for m in ('torch', 'jax', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# frameworks/harness/'s modules in import order: each imports only those before it
# (docs/ARCHITECTURE.md, "Import rules")
HARNESS_ORDER = ("options", "session", "sidebyside", "host", "gemm", "scaleout", "timing", "machine", "memory",
                 "serving", "run", "distributed")


def test_harness_modules_import_only_those_below_them():
    import ast
    from pathlib import Path
    folder = Path(frameworks.__file__).parent / "harness"
    assert {p.stem for p in folder.glob("*.py")} == {*HARNESS_ORDER, "__init__"}
    for i, name in enumerate(HARNESS_ORDER):
        tree = ast.parse((folder / f"{name}.py").read_text())
        imported = {n.module.split(".")[2] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("frameworks.harness.")}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                     and n.module == "frameworks.harness" for a in n.names}
        assert imported <= set(HARNESS_ORDER[:i]), (name, imported - set(HARNESS_ORDER[:i]))
        assert "frameworks.pytest_plugin" not in ast.dump(tree), name


def test_unknown_framework_names_the_valid_ones():
    with pytest.raises(FwbenchError, match=r"unknown framework 'pytorch': choose one of torch, jax, tensorflow"):
        frameworks.load("pytorch")
    with pytest.raises(FwbenchError, match="unknown framework 'mxnet'"):
        split_names("torch,mxnet", "framework", frameworks.names())


def test_missing_framework_is_one_line_with_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "jax" else real(n, *a))
    monkeypatch.setattr(frameworks, "_LOADED", {})
    with pytest.raises(FrameworkUnavailable) as e:
        frameworks.load("jax")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("jax is not installed: pip install 'fwbench[jax]'")
    assert frameworks.status(("jax",))["jax"] == msg


def test_broken_framework_import_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(frameworks, "_LOADED", {})

    def boom(name, *a):
        raise ImportError("libfoo.so: cannot open shared object file\nmore detail")
    monkeypatch.setattr(frameworks.importlib, "import_module", boom)
    reason = frameworks.status(("torch",))["torch"]
    assert reason.startswith("torch failed to import (ImportError: libfoo.so: cannot open shared object file)")


@pytest.mark.parametrize("changes,match", [
    ({"n_embd": 65}, "n_embd \\(65\\) must be divisible by n_head \\(4\\)"),
    ({"n_layer": 0}, "n_layer must be a positive integer, got 0"),
    ({"vocab_size": -3}, "vocab_size must be a positive integer"),
    ({"dropout": 0.1}, "dropout must be 0.0"),
    ({"n_heads": 4}, "GPTConfig has no field n_heads: valid fields are"),
])
def test_invalid_gpt_configs_are_refused_with_reason(changes, match):
    with pytest.raises(FwbenchError, match=match):
        replace_config(gpt.preset("tiny").config, **changes)


def test_unknown_preset_and_task():
    with pytest.raises(FwbenchError, match="unknown GPT preset 'huge': choose one of tiny, small, gpt2, gpt2-cpu"):
        gpt.preset("huge")
    with pytest.raises(FwbenchError, match="unknown GPT task 'backward'"):
        gpt.task_spec(gpt.preset("tiny").config, 2, "backward")


def test_sequence_longer_than_block_is_refused():
    cfg = gpt.preset("tiny").config
    with pytest.raises(FwbenchError, match="sequence length 33 exceeds block_size 32"):
        cfg.check_tokens(np.zeros((1, 33), np.int32))
    with pytest.raises(FwbenchError, match="sequence length 40 must be in 1..block_size"):
        gpt.make_batch(cfg, 2, seq_len=40)


def test_params_have_gpt2_names_shapes_and_init():
    cfg = gpt.preset("small").config
    p = gpt.init_params(cfg, seed=0)
    assert p["h.0.attn.c_attn.weight"].shape == (256, 768)        # Conv1D layout (in, out)
    assert p["h.3.mlp.c_proj.weight"].shape == (1024, 256)
    assert p["wte.weight"].shape == (4096, 256) and p["wpe.weight"].shape == (128, 256)
    assert all(v.dtype == np.float32 for v in p.values())
    assert np.std(p["wte.weight"]) == pytest.approx(0.02, rel=0.02)
    assert np.std(p["h.0.attn.c_proj.weight"]) == pytest.approx(0.02 / math.sqrt(8), rel=0.03)
    assert np.std(p["h.0.mlp.c_proj.weight"]) == pytest.approx(0.02 / math.sqrt(8), rel=0.03)
    assert not p["h.1.attn.c_attn.bias"].any() and (p["ln_f.weight"] == 1).all()
    np.testing.assert_array_equal(p["wte.weight"], gpt.init_params(cfg, seed=0)["wte.weight"])
    assert not np.array_equal(p["wte.weight"], gpt.init_params(cfg, seed=1)["wte.weight"])
    with pytest.raises(FwbenchError, match="shape"):
        gpt.check_params(cfg, {**p, "wte.weight": p["wte.weight"][:10]})


def test_gpt2_preset_has_124m_parameters():
    assert gpt.n_params(gpt.preset("gpt2").config, non_embedding=False) == 124_439_808


def test_flops_formula_by_hand():
    cfg = gpt.GPTConfig(block_size=8, vocab_size=10, n_layer=1, n_head=1, n_embd=4)
    # non-embedding params: wte 40 + block (2*4 + 4*12+12 + 4*4+4 + 2*4 + 4*16+16 + 16*4+4) + ln_f 8
    n = 40 + (8 + 60 + 20 + 8 + 80 + 68) + 8
    assert gpt.n_params(cfg) == n
    assert gpt.flops_per_token(cfg, 8, training=False) == 2 * n + 4 * 1 * 4 * 8
    assert gpt.flops_per_token(cfg, 8, training=True) == 3 * (2 * n + 4 * 1 * 4 * 8)
    spec = gpt.task_spec(cfg, 3, "train_step")
    assert spec.items == 24 and spec.flops == 24 * 3 * (2 * n + 128)


def test_generate_flops_count_the_head_once_per_prefill():
    """Every framework's prefill applies the head (x @ wte^T, 2*V*C FLOPs a position) to the
    last prompt position only; each decoded token pays it once."""
    cfg = gpt.GPTConfig(block_size=16, vocab_size=10, n_layer=1, n_head=1, n_embd=4)
    head = 2 * 10 * 4
    body = lambda ctx: gpt.flops_per_token(cfg, ctx, training=False) - head   # noqa: E731
    t0, n_new, batch = 5, 4, 3
    prefill = t0 * body(t0) + head
    decode = sum(body(t0 + j) + head for j in range(1, n_new))
    assert gpt.generate_flops(cfg, batch, t0, n_new) == batch * (prefill + decode)
    assert gpt.task_spec(cfg, batch, "generate").flops == gpt.generate_flops(cfg, batch, *gpt.generate_lengths(cfg))


def test_task_specs_rotate_distinct_nonzero_inputs():
    cfg = gpt.preset("tiny").config
    for task in gpt.TASKS:
        spec = gpt.task_spec(cfg, 2, task)
        assert len(spec.inputs) == gpt.POOL
        assert not np.array_equal(spec.inputs[0][0], spec.inputs[1][0])
        assert all(a.any() for inp in spec.inputs for a in inp)
    gen = gpt.task_spec(cfg, 2, "generate")
    assert gen.inputs[0][0].shape == (2, 8) and gen.kwargs == {"n_new": 8} and gen.items == 16


def test_reference_targets_are_next_tokens_and_loss_near_uniform():
    cfg = gpt.preset("tiny").config
    x, y = gpt.make_batch(cfg, 2, seed=5)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    loss = gpt.reference_loss(cfg, gpt.init_params(cfg), x, y)
    assert abs(loss - math.log(cfg.vocab_size)) < 0.2   # small init: near-uniform predictions


def test_adamw_reference_first_step_is_sign_times_lr():
    opt = gpt.OPTIMIZER
    p = {"w": np.ones((2, 2)), "b": np.ones(2)}
    g = {"w": np.full((2, 2), 1e-3), "b": np.full(2, -1e-3)}
    out = adamw_reference(p, [g], opt, decay=["w"])
    # step 1: m_hat = g, v_hat = g^2 -> update = lr * sign(g) (eps negligible); decay on w only
    np.testing.assert_allclose(out["w"], 1 * (1 - opt.lr * opt.weight_decay) - opt.lr, rtol=1e-6)
    np.testing.assert_allclose(out["b"], 1 + opt.lr, rtol=1e-6)


def test_rel_err_norm():
    assert rel_err(np.array([3.0, 4.0]), np.array([3.0, 4.0])) == 0
    assert rel_err(np.array([3.0, 4.5]), np.array([3.0, 4.0])) == pytest.approx(0.1)
    with pytest.raises(AssertionError, match="shape mismatch"):
        rel_err(np.zeros(2), np.zeros(3))


def test_record_validation():
    rec = record_mod.empty(framework="torch", framework_version="2", workload="gpt", task="forward",
                           mode="eager", preset="tiny", shape="B=2", param_dtype="float32", device="cpu",
                           threads=2, items=64, unit="tokens", flops=1.0, status="ok")
    assert record_mod.problems(rec) == []
    bad = dict(rec, status="great", threads="2")
    del bad["flops"]
    probs = record_mod.problems(bad)
    assert any("missing field(s) flops" in p for p in probs)
    assert any("status 'great'" in p for p in probs)
    assert any("'threads' has str" in p for p in probs)


def test_older_records_name_the_parameter_dtype_dtype():
    """Files of schema 3 and before wrote `dtype` for what is now param_dtype (record.RENAMED):
    they stay valid and read as param_dtype; a new record states the compute dtype too."""
    rec = record_mod.empty(framework="torch", framework_version="2", workload="gpt", task="forward",
                           mode="eager", preset="tiny", shape="B=2", param_dtype="float32", device="cpu",
                           threads=2, items=64, unit="tokens", flops=1.0, status="ok", precision="bf16",
                           compute_dtype="bfloat16")
    old = {("dtype" if k == "param_dtype" else k): v for k, v in rec.items() if k != "compute_dtype"}
    assert record_mod.problems(old) == [] and record_mod.upgraded(old)["param_dtype"] == "float32"
    assert "dtype" not in record_mod.upgraded(old) and record_mod.upgraded(rec) is rec
    # what it computed in is stated from its precision's policy, as a new record states it
    assert record_mod.upgraded(old)["compute_dtype"] == "bfloat16"
    assert record_mod.upgraded({**old, "precision": None})["compute_dtype"] == "float32"
    del old["dtype"]
    assert any("missing field(s) param_dtype" in p for p in record_mod.problems(old))


@pytest.mark.parametrize("args,expected", [
    (["--framework", "pytorch"], "unknown framework 'pytorch': choose one of torch, jax, tensorflow"),
    (["--preset", "huge"], "unknown GPT preset 'huge': choose one of tiny, small, gpt2, gpt2-cpu "
                           "(per-workload presets"),
    (["--device", "tpu"], "unknown device 'tpu': choose one of cpu, cuda, gpu"),
    (["--workload", "bert"], "unknown workload 'bert'"),
])
def test_bad_pytest_options_give_one_line(args, expected):
    out = subprocess.run([sys.executable, "-m", "pytest", "tests/benchmarks", "--benchmark-only",
                          "--collect-only", "-q", *args], capture_output=True, text=True)
    assert out.returncode != 0
    err = out.stderr.strip()
    assert expected in err and "Traceback" not in err, err


def test_per_workload_presets():
    from frameworks.harness.options import parse_presets
    assert parse_presets("small", ("gpt", "diffusion")) == {"gpt": "small", "diffusion": "small"}
    assert parse_presets("tiny,gpt=gpt2", ("gpt", "diffusion")) == {"gpt": "gpt2", "diffusion": "tiny"}
    with pytest.raises(FwbenchError, match="unknown diffusion preset 'gpt2'"):
        parse_presets("gpt2", ("gpt", "diffusion"))
    with pytest.raises(FwbenchError, match="unknown workload 'bert'"):
        parse_presets("bert=tiny", ("gpt",))


_FAULTS = """
import ctypes, resource, sys
sys.path.insert(0, {root!r})
from frameworks.base import configure_allocator
print(configure_allocator())
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
size = 40 * 2**20
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):  # what XLA:CPU does every step: a large scratch buffer from malloc, written, freed
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc: Linux only")
@pytest.mark.parametrize("setting", ["retain", "default"])
def test_allocator_keeps_freed_memory_unless_told_not_to(setting):
    """With the heap kept, ten 40 MB buffers are faulted in once (~10,000 page faults);
    with glibc's default each is a fresh mmap, faulted in every time (~100,000)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", _FAULTS.format(root=root)], capture_output=True, text=True,
                         env={**os.environ, "FWBENCH_MALLOC": setting}, timeout=120, check=True).stdout.split("\n")
    note, faults = out[0], int(out[1])
    pages = 10 * 40 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    if setting == "default":
        assert note.startswith("default") and faults > 0.8 * pages
    elif note.startswith("default"):
        pytest.skip(f"allocator left alone here: {note}")
    else:
        assert note == frameworks.base.RETAIN_NOTE and faults < 0.3 * pages


def test_bad_allocator_setting_names_the_valid_ones(monkeypatch):
    monkeypatch.setattr(frameworks.base, "_allocator", None)
    monkeypatch.setenv("FWBENCH_MALLOC", "jemalloc")
    with pytest.raises(FwbenchError, match="unknown FWBENCH_MALLOC 'jemalloc': choose one of retain, default"):
        frameworks.base.configure_allocator()


@pytest.mark.parametrize("workload", workloads.WORKLOADS)
def test_variants_default_leaves_out_optional_variants_only(workload):
    """--variants default (fwbench run's with sets) runs each case's first strategy where the
    others are optional (gpt, diffusion: torch's train-step recipes); a workload whose strategies
    are what it compares (the serving artefacts, the dynamic-shape strategies, the transforms
    and their loops, interop's rewrites) keeps them all: a default serving run exported nothing."""
    from workloads.case import declared_cases
    W = workloads.get(workload)
    assert isinstance(W.OPTIONAL_VARIANTS, bool)
    preset = "tiny" if "tiny" in W.PRESETS else next(iter(W.PRESETS))
    fws = ["torch", "jax", "tensorflow"]
    every = declared_cases(workload, fws, preset)
    default = declared_cases(workload, fws, preset, variants="default")
    assert any(c.strategy is not None for c in every), "no strategy beyond the default: nothing to check"
    if W.OPTIONAL_VARIANTS:
        assert {c.id for c in default} < {c.id for c in every} and all(c.strategy is None for c in default)
    else:
        assert [c.id for c in default] == [c.id for c in every]
    if workload == "serving":
        assert {"torch-compiled-generate-aoti", "jax-compiled-sample-jax-export",
                "tensorflow-graph-generate-onnx"} <= {c.id for c in default}


def test_cuda_graphs_are_a_labelled_torch_variant_declared_on_cuda_only():
    from workloads.base import CUDA_GRAPHS
    from workloads.case import Case, declared_cases
    on = {c.id for c in declared_cases("gpt", ["torch", "jax"], "tiny", device="cuda")}
    assert {"torch-compiled-forward-cudagraphs", "torch-compiled-train_step-cudagraphs"} <= on
    assert not any(CUDA_GRAPHS in i for i in on if not i.startswith("torch-compiled"))
    assert not any(CUDA_GRAPHS in c.id for c in declared_cases("diffusion", ["torch"], "tiny", device="cpu"))
    assert not any(CUDA_GRAPHS in c.id for c in declared_cases("gpt", ["torch"], "tiny", device="cuda",
                                                                variants="default"))
    pytest.importorskip("torch")
    fw = frameworks.load("torch")
    cfg = gpt.preset("tiny").config
    with pytest.raises(frameworks.Unsupported, match="replays CUDA graphs"):
        fw.build(Case("torch", "gpt", "forward", "compiled", CUDA_GRAPHS), cfg, gpt.init_params(cfg, 0))


def test_fwbench_cpus_takes_a_cpu_list_and_keeps_a_process_on_it():
    from workloads.base import parse_cpus
    assert parse_cpus("0-3,6") == {0, 1, 2, 3, 6} and parse_cpus(" 1 ") == {1}
    with pytest.raises(FwbenchError, match=r"^FWBENCH_CPUS='0-x': not a CPU list; write it as taskset -c does"):
        parse_cpus("0-x")
    mine = sorted(os.sched_getaffinity(0))
    code = "import os; from frameworks.base import set_threads; set_threads(); print(sorted(os.sched_getaffinity(0)))"
    for named, expected in ((str(mine[-1]), [mine[-1]]), ("4096", mine)):    # none of a process's CPUs: as is
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, FWBENCH_CPUS=named),
                             capture_output=True, text=True, check=True).stdout
        assert out.strip() == str(expected), named
