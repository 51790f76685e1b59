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
from tests.helpers import INSTALLED
from workloads import interop
from workloads.base import Unsupported
from workloads.case import MODES, PRECISIONS, declared_cases

ROOT = Path(__file__).resolve().parent.parent
BUILD_ARGS = ["adapter", "config", "params", "case"]
# workload -> module-level names its framework files must define (besides build)
REQUIRED = {"dynamic": ("MODELS",), "interop": ("PROGRAMS", "REWRITES")}
# workload -> per-framework tables that must name every framework (an empty entry is a
# decision; a missing one is an omission)
TABLES = {"interop": lambda: interop.REWRITTEN}


def _tasks(W) -> tuple[str, ...]:
    return W.tasks(W.preset("tiny").config) if hasattr(W, "tasks") else W.TASKS


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
    """Each case the plugin would collect at the tiny preset: its model builds, and where the
    case's variant is not the framework's the refusal says so (Unsupported, not a crash).
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
                    getattr(model, W.task_spec(p.config, p.batch, case.task, strategy=case.strategy).method)
                elif w == "derivatives":                    # its strategies are checked per problem
                    model.strategy_for(W.problem_of(case.task)[0])
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
    from reports.running import runner
    from workloads import options

    def declared(cls, skip):
        return {f.name: f.default for f in dataclasses.fields(cls) if f.name not in skip}
    own = {"frameworks", "workloads", "max_rounds", "seed", "presets"}     # not options of a process
    assert declared(Options, own) == {o.name: o.default for o in options.HARNESS
                                      if o.name not in ("framework", "workload")}
    run_own = {"frameworks", "workloads", *(name for name, _, _ in runner.RUN_FIELDS)}
    assert declared(runner.RunOptions, run_own) == {o.name: o.default for o in options.HARNESS
                                                    if not o.process and o.name not in ("framework", "workload")}
    assert {"budget_s", "min_rounds", "variants", "matmul_precision"} <= declared(runner.RunOptions, run_own).keys()
    assert options.argv({"threads": 2, "bare_loop": True, "rounds": None, "cache_role": "cold"}) == \
        ["--threads", "2", "--bare-loop", "--cache-role", "cold"]
    with pytest.raises(workloads.FwbenchError, match="--threads must be a positive integer, got 0"):
        options.checked({"threads": 0})
    with pytest.raises(workloads.FwbenchError, match="unknown device 'tpu'"):
        options.checked({"device": "tpu"})


def test_fwbench_run_passes_its_harness_options_on(tmp_path):
    """What `fwbench run` takes (workloads.options: cli=True) reaches each process's pytest
    command line by the same declaration, defaults left out."""
    from reports.running import runner
    opts = runner.RunOptions(frameworks=("torch",), precision="fp32,bf16", threads=2, device="cpu")
    cmd = runner.pytest_command("torch", opts, tmp_path / "x.json", repeat=1, role="warm")
    text = " ".join(cmd)
    for flag in ("--framework torch", "--precision fp32,bf16", "--threads 2", "--repeat 1", "--cache-role warm"):
        assert flag in text, flag
    assert "--device" not in text and "--preset" not in text       # their defaults: the process's own
