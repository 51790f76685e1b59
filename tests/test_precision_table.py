"""Precision is one table end to end (workloads/precision.py: POLICIES): a throw-away policy
added there, and nowhere else, is recorded in the machine's CPU flags, finds its vendor peak
through its compute dtype, and gets the precision section and the Summary's line of its own."""
from __future__ import annotations

import io

import pytest

import reports
from reports.conclusions import findings, replicates
from reports.measures import precision as rprecision
from reports.rendering.sections import precision as drawing
from tests.support.reports_fixtures import simulated_processes
from workloads import precision

NEW = "fp16x"


@pytest.fixture
def fp16x(monkeypatch):
    """A policy only this test knows: float16 products, native under AMX-FP16."""
    monkeypatch.setitem(precision.POLICIES, NEW, precision.Policy(
        "float16", 10, 1024.0, ("amx_fp16",), "products' inputs float16, loss scaled by 1024"))
    return NEW


def test_the_machine_records_the_new_policys_native_flag(fp16x, monkeypatch):
    from frameworks.harness import machine
    cpuinfo = "processor\t: 0\nflags\t\t: fpu sse avx512f amx_tile amx_fp16 amx_bf16\n"
    monkeypatch.setattr("builtins.open", lambda *a, **k: io.StringIO(cpuinfo))
    assert machine.cpu_flags() == ["avx512f", "amx_tile", "amx_bf16", "amx_fp16"]
    assert precision.native(fp16x, machine.cpu_flags()) is True
    assert precision.native_words(fp16x) == "AMX-FP16"


def test_the_new_policy_finds_its_vendor_peak_through_its_compute_dtype(fp16x):
    from frameworks.harness import gemm
    assert gemm.vendor_peak("NVIDIA H100 80GB HBM3", fp16x) == 989.5e12
    assert gemm.vendor_peak("NVIDIA A100-SXM4-80GB", fp16x) == 312e12
    for _, peaks in gemm.VENDOR_PEAKS:          # every policy's compute dtype is a datasheet column
        assert {p.compute for p in precision.POLICIES.values()} <= set(peaks)


@pytest.mark.parametrize("flags", [["avx512f", "amx_fp16"], ["avx512f"]])
def test_the_section_and_the_summary_name_the_new_policy(fp16x, tmp_path, flags):
    medians = {("gpt", t, "compiled", p): (0.01 if p == "fp32" else 0.005) for t in ("forward", "train_step")
               for p in ("fp32", fp16x)}
    simulated_processes(tmp_path / "r", "torch", medians, cold=1, warm=4, seed=3, cpu_flags=flags)
    c = replicates.cases(reports.load(tmp_path / "r"))
    fam = findings.prepare(c)
    blocks = drawing.blocks(c, fam)
    assert blocks[0] == ("h", 2, f"Precision: {fp16x} against fp32")
    assert "loss scaled by 1024" in blocks[1][1]
    table = blocks[2][1]
    assert f"{fp16x} / fp32 step time (geo. mean)" in table.columns
    [line] = rprecision.sentence(c, fam)
    assert line.startswith(f"{fp16x} (workloads/precision.py's policy) over fp32")
    if "amx_fp16" in flags:
        assert "natively (AMX-FP16)" in blocks[1][1] and table["verdict"].iloc[0].startswith(f"{fp16x} faster")
    else:
        assert f"{fp16x} emulated on this CPU (no AMX-FP16)" in blocks[1][1] and "emulated" in line


def test_the_summarys_scope_names_each_policy(fp16x, tmp_path):
    from reports.conclusions import summary
    medians = {("gpt", "forward", "compiled", p): 0.01 for p in ("fp32", "bf16", fp16x)}
    simulated_processes(tmp_path / "r", "torch", medians, cold=1, warm=2, seed=1, cpu_flags=["amx_bf16"])
    c = replicates.cases(reports.load(tmp_path / "r"))
    [machine] = [ln for ln in summary.scope(c) if ln.startswith("Machine:")]
    assert "bf16: workloads/precision.py's policy, the CPU multiplies bf16 natively (AVX512-BF16 or AMX-BF16)" \
        in machine
    assert f"{fp16x}: workloads/precision.py's policy, {fp16x} emulated on this CPU (no AMX-FP16)" in machine
