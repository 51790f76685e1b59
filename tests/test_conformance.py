"""The contract between frameworks and workloads, generated from the registries (issue 20):
every framework (frameworks.names()) x workload (workloads.available()) has its file with
`build(adapter, config, params, case)`, every task and mode of the framework declares at
least one variant (workloads.<name>.strategies), the per-framework tables a workload keeps
name every framework, and every declared case of an installed framework builds or is
refused with a recorded reason (Unsupported) before anything runs. A framework added
without, say, derivatives strategies fails here, not silently with zero cases.
"""
from __future__ import annotations

import ast
import importlib
import shutil
from pathlib import Path

import pytest

import frameworks
import workloads
from tests.support.helpers import INSTALLED
from workloads import interop
from workloads.base import Model, Unsupported
from workloads.case import MODES, PRECISIONS, declared_cases

ROOT = Path(__file__).resolve().parent.parent
BUILD_ARGS = ["adapter", "config", "params", "case"]
# workload -> module-level names its framework files must define (besides build)
REQUIRED = {"dynamic": ("MODELS",), "interop": ("PROGRAMS", "REWRITES")}
# The roles every framework's model file names alike, so the three files read side by side: a
# function, class, method or self.attribute, its name compared without case or underscores
# (torch's module class CausalSelfAttention and JAX's function causal_self_attention are one
# role). Beyond the workload's Protocol methods: the layers, the network's hidden states, and
# the two decoding paths (with the key/value cache, and the full-pass reference).
ROLES = {
    "gpt": ("gelu", "layer_norm", "cross_entropy", "causal_attention", "causal_self_attention", "mlp",
            "hidden", "generate_cached", "generate_full"),
    "diffusion": ("timestep_embedding", "group_norm", "conv", "norm", "resnet_block", "attn_block", "upsample",
                  "eps", "sample"),
    "dynamic": ("prefill", "prefill_int", "generate", "train", "eps"),
    "parallel": ("data_parallel", "DataParallel", "place_inputs", "train_step", "grads", "collectives",
                 "device_state", "export_params"),
}
# workload -> per-framework tables that must name every framework (an empty entry is a
# decision; a missing one is an omission)
TABLES = {"interop": lambda: interop.REWRITTEN}


def _tasks(W) -> tuple[str, ...]:
    return W.tasks(W.preset("tiny").config)


def problems(names: tuple[str, ...], root: Path = ROOT) -> list[str]:
    """What a framework lacks, as lines: missing files, a build with another signature,
    missing module-level definitions, a task and mode with no declared variant, a table
    without an entry for it."""
    out = []
    for fw in names:
        for w in workloads.available():
            path = root / "frameworks" / fw / f"{w}.py"
            if not path.exists():
                out.append(f"{fw}: no frameworks/{fw}/{w}.py")
                continue
            tree = ast.parse(path.read_text())
            defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            assigned = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
            build = defs.get("build")
            if not isinstance(build, ast.FunctionDef):
                out.append(f"{fw}/{w}: no build function")
            elif [a.arg for a in build.args.args] != BUILD_ARGS:
                out.append(f"{fw}/{w}: build({', '.join(a.arg for a in build.args.args)}), "
                           f"not build({', '.join(BUILD_ARGS)})")
            for name in REQUIRED.get(w, ()):
                if name not in defs and name not in assigned:
                    out.append(f"{fw}/{w}: no {name}")
            W = workloads.get(w)
            for t in _tasks(W):
                for m in MODES:
                    if not W.strategies(fw, m, t):
                        out.append(f"{fw}/{w}: task {t} in {m} mode declares no variant "
                                   f"(workloads/{w}.py strategies)")
            table = TABLES.get(w)
            if table is not None and fw not in table():
                out.append(f"{fw}/{w}: no entry in workloads/{w}.py's per-framework table")
    return out


def registry_problems(root: Path = ROOT) -> list[str]:
    """A framework folder (frameworks/<name>/__init__.py defining an Adapter) without its entry
    in the registry (workloads/framework_facts.py: FACTS), and an entry without its folder."""
    from workloads.framework_facts import FACTS
    out = []
    for init in sorted((root / "frameworks").glob("*/__init__.py")):
        tree = ast.parse(init.read_text())
        if any(isinstance(n, ast.ClassDef) and n.name == "Adapter" for n in tree.body) \
                and init.parent.name not in FACTS:
            out.append(f"frameworks/{init.parent.name}/ has an Adapter but no entry in workloads/framework_facts.py "
                       "FACTS")
    out += [f"{name}: an entry in FACTS without frameworks/{name}/__init__.py" for name in FACTS
            if not (root / "frameworks" / name / "__init__.py").is_file()]
    return out


def test_every_framework_meets_the_contract():
    from workloads.case import FRAMEWORKS
    assert frameworks.names() == FRAMEWORKS          # the reports' list (they never import frameworks)
    assert registry_problems() == []
    assert problems(frameworks.names()) == []


def role(name: str) -> str:
    return name.lower().replace("_", "")


def defined_names(path: Path) -> set[str]:
    """The roles a module names: its functions, classes and methods, and the attributes its
    methods set on self."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(role(n.name))
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                out |= {role(e.attr) for e in (t.elts if isinstance(t, ast.Tuple) else [t])
                        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"}
    return out


@pytest.mark.parametrize("module", sorted(ROLES))
def test_the_frameworks_model_files_name_each_role_alike(module):
    """frameworks/<fw>/<module>.py of every framework names each of ROLES[module]; a role
    renamed in one framework (or missing) fails here, naming the file."""
    for fw in frameworks.names():
        path = ROOT / "frameworks" / fw / f"{module}.py"
        names = defined_names(path)
        missing = [r for r in ROLES[module] if role(r) not in names]
        assert not missing, f"{path.relative_to(ROOT)} has no {', '.join(missing)} (ROLES[{module!r}])"


def test_a_framework_without_its_registry_entry_fails_with_a_clear_line(tmp_path):
    """MLX added as a folder with an adapter but no entry in workloads/framework_facts.py: the
    contract names it, and every per-framework fact (its cache folder, which base.configure_caches
    and the adapters read) says where the entry goes, never a bare KeyError."""
    from frameworks import base
    from workloads.framework_facts import facts
    for fw in (*frameworks.names(), "harness"):     # the adapters, and a package that is no framework
        (tmp_path / "frameworks" / fw).mkdir(parents=True)
        shutil.copy(ROOT / "frameworks" / fw / "__init__.py", tmp_path / "frameworks" / fw / "__init__.py")
    assert registry_problems(tmp_path) == []
    (tmp_path / "frameworks" / "mlx").mkdir()
    shutil.copy(ROOT / "frameworks" / "jax" / "__init__.py", tmp_path / "frameworks" / "mlx" / "__init__.py")
    assert registry_problems(tmp_path) == ["frameworks/mlx/ has an Adapter but no entry in "
                                           "workloads/framework_facts.py FACTS"]
    shutil.rmtree(tmp_path / "frameworks" / "tensorflow")
    assert "tensorflow: an entry in FACTS without frameworks/tensorflow/__init__.py" in registry_problems(tmp_path)
    line = r"framework 'mlx' has no entry in workloads/framework_facts.py FACTS \(its module, .*entries: torch, jax"
    for lookup in (facts, base.cache_dir):
        with pytest.raises(workloads.FwbenchError, match=line):
            lookup("mlx")


def test_a_framework_without_derivatives_strategies_fails(tmp_path):
    """MLX added with a file and a build for every workload, but no strategies: caught."""
    for w in workloads.available():
        src = ROOT / "frameworks" / "jax" / f"{w}.py"
        dst = tmp_path / "frameworks" / "mlx" / f"{w}.py"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
    found = problems(("mlx",), tmp_path)
    assert any(p.startswith("mlx/derivatives: task") and "declares no variant" in p for p in found), found
    assert any(p.startswith("mlx/interop: no entry") for p in found), found
    assert not any("no frameworks/mlx" in p or "build(" in p for p in found), found
    old_style = "def build(adapter, config, params, mode, device):\n    pass\n"
    (tmp_path / "frameworks" / "mlx" / "gpt.py").write_text(old_style)
    assert "mlx/gpt: build(adapter, config, params, mode, device), not build(adapter, config, params, case)" \
        in problems(("mlx",), tmp_path)


def test_modes_and_rewrites_agree_with_the_frameworks_own_tables():
    for fw in INSTALLED:
        a = frameworks.load(fw)
        assert set(a.modes) <= set(MODES)
        rw = importlib.import_module(f"frameworks.{fw}.interop").REWRITES
        assert set(rw) == set(interop.REWRITTEN[fw]), fw


@pytest.mark.parametrize("framework", list(frameworks.names()))
def test_every_declared_case_builds_or_is_refused_with_a_reason(framework):
    """Each case the plugin would collect at the tiny preset: its model builds and is its
    workload's declared MODEL (a Protocol: its methods and attributes) and a
    workloads.base.Model (the optional behaviour's defaults), and where the case's
    variant is not the framework's the refusal says so (Unsupported, not a crash).
    Nothing is called or compiled here (interop's programs are probed on first look-up, so
    they are only built)."""
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    a = frameworks.load(framework)
    built = refused = 0
    for w in workloads.available():
        W = workloads.get(w)
        p = W.preset("tiny")
        params = W.init_params(p.config, seed=0)
        for case in declared_cases(w, (framework,), "tiny", precisions=PRECISIONS):
            if case.mode not in a.modes:
                refused += 1
                continue
            try:
                model = a.build(case, p.config, params)
                if w == "dynamic":                          # its models are made on look-up
                    method = W.task_spec(p.config, p.batch, case.task, strategy=case.strategy).method
                    getattr(model, method)
                    model = model.made(method) if method in ("prefill", "generate", "train") else None
                elif w == "derivatives":                    # its strategies are checked per problem
                    model.strategy_for(W.problem_of(case.task)[0])
                assert model is None or isinstance(model, W.MODEL), \
                    f"{case}: {type(model).__name__} is not a {W.MODEL.__name__}"
                # the harness reads the optional behaviour from these declared defaults, no probe
                assert model is None or isinstance(model, Model), f"{case}: {type(model).__name__} is not a Model"
                built += 1
            except Unsupported as e:
                assert str(e).strip(), case
                refused += 1
    assert built > 0, (built, refused)


def test_every_harness_option_is_declared_once():
    """workloads.options.HARNESS is the one declaration: the pytest plugin adds exactly those
    flags, the harness's Options and `fwbench run`'s RunOptions are made from it (a field per
    option, with its declared default), and `fwbench run` passes its own on by argv."""
    import dataclasses

    from frameworks.harness import Options
    from reports.commands import plan
    from workloads import options

    def declared(cls, skip):
        return {f.name: f.default for f in dataclasses.fields(cls) if f.name not in skip}
    own = {"frameworks", "workloads", "max_rounds", "seed", "presets"}     # not options of a process
    assert declared(Options, own) == {o.name: o.default for o in options.HARNESS
                                      if o.name not in ("framework", "workload")}
    run_own = {"frameworks", "workloads", *(name for name, _, _ in plan.RUN_FIELDS)}
    assert declared(plan.RunOptions, run_own) == {o.name: o.default for o in options.HARNESS
                                                    if not o.process and o.name not in ("framework", "workload")}
    assert {"budget_s", "min_rounds", "variants", "matmul_precision"} <= declared(plan.RunOptions, run_own).keys()
    assert options.argv({"threads": 2, "bare_loop": True, "rounds": None, "cache_role": "cold"}) == \
        ["--threads", "2", "--bare-loop", "--cache-role", "cold"]
    with pytest.raises(workloads.FwbenchError, match="--threads must be a positive integer, got 0"):
        options.checked({"threads": 0})
    with pytest.raises(workloads.FwbenchError, match="unknown device 'tpu'"):
        options.checked({"device": "tpu"})


def test_fwbench_run_passes_its_harness_options_on(tmp_path):
    """What `fwbench run` takes (workloads.options: cli=True) reaches each process's pytest
    command line by the same declaration, defaults left out."""
    from reports.commands import plan, process
    opts = plan.RunOptions(frameworks=("torch",), precision="fp32,bf16", threads=2, device="cpu")
    cmd = process.pytest_command("torch", opts, tmp_path / "x.json", repeat=1, role="warm")
    text = " ".join(cmd)
    for flag in ("--framework torch", "--precision fp32,bf16", "--threads 2", "--repeat 1", "--cache-role warm"):
        assert flag in text, flag
    assert "--device" not in text and "--preset" not in text       # their defaults: the process's own


# ----------------------------------------------------------------------------- precisions

def _dtype_name(d) -> str:
    """A framework's dtype by its numpy name: torch.bfloat16, jnp.bfloat16, tf.bfloat16 -> 'bfloat16'."""
    return str(getattr(d, "name", None) or getattr(d, "__name__", None) or d).removeprefix("torch.")


def _table(fw: str):
    """frameworks/<fw>/precision.py, or, where a framework has none, a table of fp32 alone."""
    import types
    try:
        return importlib.import_module(f"frameworks.{fw}.precision")
    except ModuleNotFoundError as e:
        if e.name != f"frameworks.{fw}.precision":
            raise
        return types.SimpleNamespace(COMPUTE={"fp32": "float32"}, LOSS_SCALING=False)


def precision_problems(fw: str) -> list[str]:
    """What a framework declares about precision and does not back: a workload's PRECISIONS
    naming a policy the framework's dtype table (frameworks/<fw>/precision.py COMPUTE; fp32
    alone where it has none) lacks, a table entry workloads/precision.py does not define or
    whose dtype is not the policy's compute dtype, a policy with loss scaling in a framework
    whose train steps do not apply it (LOSS_SCALING)."""
    from workloads.precision import DEFAULT, POLICIES
    table = _table(fw)
    out = []
    for name, dtype in table.COMPUTE.items():
        if name not in POLICIES:
            out.append(f"{fw}: its dtype table names {name!r}, which workloads/precision.py does not define")
        elif _dtype_name(dtype) != POLICIES[name].compute:
            out.append(f"{fw}: its dtype table gives {name} {_dtype_name(dtype)}, the policy computes in "
                       f"{POLICIES[name].compute}")
        elif POLICIES[name].loss_scale is not None and not table.LOSS_SCALING:
            out.append(f"{fw}: {name} scales the loss, and its train steps apply no loss scale (LOSS_SCALING)")
    if DEFAULT not in table.COMPUTE:
        out.append(f"{fw}: its dtype table lacks {DEFAULT}, the default policy")
    for w in workloads.available():
        declared = getattr(importlib.import_module(f"frameworks.{fw}.{w}"), "PRECISIONS", ("fp32",))
        for name in declared:
            if name not in table.COMPUTE:
                out.append(f"{fw}/{w}: declares {name}, which its dtype table (frameworks/{fw}/precision.py) lacks")
    return out


@pytest.mark.parametrize("framework", list(frameworks.names()))
def test_every_declared_precision_is_in_the_frameworks_dtype_table(framework):
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    assert precision_problems(framework) == []


def _rel(a, b) -> float:
    import numpy as np
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def role_errors(fw: str, precision: str) -> dict[str, float]:
    """The relative error of each role of frameworks/<fw>/precision.py (matmul, attention, conv)
    at the policy's compute dtype, against float64 numpy on the same float32 inputs."""
    import numpy as np
    a = frameworks.load(fw)
    P = importlib.import_module(f"frameworks.{fw}.precision")
    c = P.COMPUTE[precision]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((32, 64), np.float32), rng.standard_normal((64, 48), np.float32)
    q, k, v = (rng.standard_normal((2, 1, 16, 32), np.float32) for _ in range(3))     # (B, heads, T, hs)
    img, ker = rng.standard_normal((2, 8, 8, 16), np.float32), rng.standard_normal((3, 3, 16, 24), np.float32)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(32)
    p = np.exp(s - s.max(-1, keepdims=True))
    att_ref = (p / p.sum(-1, keepdims=True)) @ v
    pad = np.pad(img.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    conv_ref = sum(np.einsum("bhwi,io->bhwo", pad[:, i:i + 8, j:j + 8], ker[i, j]) for i in range(3) for j in range(3))
    arr = lambda z: a.asarray(z, "cpu")  # noqa: E731
    out = {"matmul": _rel(a.to_numpy(P.matmul(arr(x), arr(w), c)), x.astype(np.float64) @ w)}
    if fw == "torch":
        import torch
        out["attention"] = _rel(a.to_numpy(P.attention(*map(arr, (q, k, v)), 32 ** -0.5, c)), att_ref)
        layer = P.Conv2d(16, 24, 3, padding=1, bias=True)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(ker.transpose(3, 2, 0, 1).copy()))
            layer.bias.zero_()
            y = P.conv(layer, torch.from_numpy(img.transpose(0, 3, 1, 2).copy()), c)
        out["conv"] = _rel(y.numpy().transpose(0, 2, 3, 1), conv_ref)
    elif fw == "jax":
        qt = lambda z: arr(z.transpose(0, 2, 1, 3))  # noqa: E731  (JAX's layout (B, T, heads, hs))
        out["attention"] = _rel(a.to_numpy(P.attention(qt(q), qt(k), qt(v), 32 ** -0.5, c)).transpose(0, 2, 1, 3),
                                att_ref)
        out["conv"] = _rel(a.to_numpy(P.conv(arr(img), arr(ker), 1, 1, c)), conv_ref)
    else:
        out["attention"] = _rel(a.to_numpy(P.attention(*map(arr, (q, k, v)), 32 ** -0.5, c)), att_ref)
        out["conv"] = _rel(a.to_numpy(P.conv(arr(img), arr(ker), c, strides=1, padding=[[0, 0], [1, 1], [1, 1],
                                                                                           [0, 0]])), conv_ref)
    return out


@pytest.mark.parametrize("framework", list(frameworks.names()))
def test_every_declared_precision_computes_at_its_dtype(framework):
    """The dtype probe common to every framework: each role (the product, the attention, the
    convolution) at each policy the framework's table declares has the error of that policy's
    compute dtype against float64, between a tenth of its unit roundoff u and 10 u (measured:
    float32 1.8-3.5 u, bfloat16 0.6-1.0 u); so a policy whose roles run float32 products (a
    reduced table entry mapped to float32, a role that ignores its dtype) fails, as does one
    whose roles round more than its dtype does."""
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    from workloads.precision import POLICIES
    if not hasattr(_table(framework), "matmul"):
        pytest.skip(f"{framework} has no precision.py: fp32 only")
    table = _table(framework).COMPUTE
    for precision in table:
        u = POLICIES[precision].unit_roundoff
        errs = role_errors(framework, precision)
        assert all(u / 10 <= e <= 10 * u for e in errs.values()), (precision, u, errs)


@pytest.mark.parametrize("framework", list(frameworks.names()))
def test_every_declared_precision_reaches_the_models_layers(framework):
    """The built models (tiny GPT and UNet, eager, the equivalence tests' O(1) weights) at each
    declared policy: their forward error against the float64 reference is at least the
    policy's unit roundoff u (measured: fp32 14-34 u, bf16 3-4 u), so a build that runs its
    layers at float32 while declaring a reduced policy (its error ~1e-6, 1e-3 u of bf16) fails.
    (Which op runs at which dtype is each framework's own probe's: tests/test_precision_<fw>.py.)"""
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    from tests import test_diffusion_equivalence as TD
    from tests import test_gpt_equivalence as TG
    from workloads import diffusion, gpt
    from workloads.case import Case, Placement
    from workloads.precision import POLICIES
    a = frameworks.load(framework)
    for w, M, ref in (("gpt", TG, lambda: gpt.reference_logits(TG.CFG, TG.PARAMS, TG.TOKENS)),
                      ("diffusion", TD, lambda: diffusion.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T))):
        method, inputs = M.W.forward
        expected = ref()
        for precision in importlib.import_module(f"frameworks.{framework}.{w}").PRECISIONS:
            m = a.build(Case(framework, w, None, "eager", precision=precision, placement=Placement("cpu")),
                        M.CFG, M.PARAMS)
            err = _rel(a.to_numpy(getattr(m, method)(*(a.asarray(x, "cpu") for x in inputs))), expected)
            assert err >= POLICIES[precision].unit_roundoff, (w, precision, err)


# What every workloads/<name>.py declares (workloads/__init__.py), read without a default.
WORKLOAD_DECLARES = ("NAME", "TASKS", "tasks", "PRESETS", "preset", "init_params", "task_spec", "strategies",
                     "device_strategies", "OPTIONAL_VARIANTS", "MODEL", "check_inputs")


@pytest.mark.parametrize("workload", workloads.WORKLOADS)
def test_every_workload_declares_its_interface(workload):
    W = workloads.get(workload)
    missing = [n for n in WORKLOAD_DECLARES if not hasattr(W, n)]
    assert not missing, f"workloads/{workload}.py declares no {', '.join(missing)}"
    assert W.NAME == workload and isinstance(W.OPTIONAL_VARIANTS, bool)
    assert all(isinstance(t, str) for t in W.tasks(W.preset(next(iter(W.PRESETS))).config))


@pytest.mark.parametrize("framework", list(frameworks.names()))
def test_every_workload_module_declares_the_policies_its_build_honours(framework):
    """Adapter.build reads each frameworks/<fw>/<workload>.py's PRECISIONS as declared (no
    default behind a probe): every module states it, and every name in it is a policy."""
    import ast

    from workloads.precision import POLICIES
    for w in workloads.WORKLOADS:
        path = Path(frameworks.__file__).parent / framework / f"{w}.py"
        names = {t.id for n in ast.parse(path.read_text()).body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)}
        names |= {a.asname or a.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.ImportFrom)
                  for a in n.names}
        assert "PRECISIONS" in names, f"{path} declares no PRECISIONS"
        if framework in INSTALLED:
            assert set(importlib.import_module(f"frameworks.{framework}.{w}").PRECISIONS) <= set(POLICIES)
