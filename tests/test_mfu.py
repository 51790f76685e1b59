"""Issue 31, points 1 and 2 on the CPU: the defaults by device (pure functions: no GPU needed),
the model FLOP counts against hand counts for the tiny presets, the MFU fields of a record
(one case through the harness with a stand-in framework) and the peaks they divide by."""
from __future__ import annotations

import math

import numpy as np
import pytest

import frameworks
from frameworks import harness
from frameworks.harness import gemm
from reports.commands import checkout, cli, flags, sets
from workloads import diffusion, gpt, options
from workloads import record as record_mod
from workloads.case import Case

GPU_PRESETS = "gpt=gpt2,diffusion=ddpm-cifar"


# ----------------------------------------------------------------------------- 1. defaults by device

@pytest.mark.parametrize("device", ["cuda", "gpu"])
@pytest.mark.parametrize("quick", [False, True])
def test_a_gpu_defaults_to_the_gpu_presets_both_precisions_and_rounds_by_budget(device, quick):
    d = options.device_defaults(device, quick)
    assert d == {"preset": GPU_PRESETS, "precision": "fp32,bf16", "rounds_by_budget": True}   # --quick: not tiny


@pytest.mark.parametrize("quick, preset", [(False, "small"), (True, "tiny")])
def test_the_cpu_defaults_are_unchanged(quick, preset):
    assert options.device_defaults("cpu", quick) == {"preset": preset, "precision": "fp32", "rounds_by_budget": quick}


def test_a_pytest_process_takes_the_devices_defaults_and_explicit_options_win():
    cuda = options.checked({"device": "cuda"})
    assert (cuda["preset"], cuda["precision"]) == (GPU_PRESETS, "fp32,bf16")
    cpu = options.checked({})
    assert (cpu["preset"], cpu["precision"]) == ("small", "fp32")
    given = options.checked({"device": "cuda", "preset": "tiny", "precision": "bf16"})
    assert (given["preset"], given["precision"]) == ("tiny", "bf16")
    o = harness.Options(frameworks=("torch",), workloads=("gpt", "diffusion", "interop"), device="cuda")
    assert o.presets == {"gpt": "gpt2", "diffusion": "ddpm-cifar", "interop": "small"} and o.precision == "fp32,bf16"


@pytest.mark.parametrize("argv, preset, rounds, cold_warm", [
    (["--device", "cuda"], GPU_PRESETS, None, (options.SETS_COLD, options.SETS_WARM)),
    (["--device", "cuda", "--quick"], GPU_PRESETS, None, (flags.QUICK_COLD, flags.QUICK_WARM)),
    (["--device", "cuda", "--preset", "tiny", "--rounds", "3"], "tiny", 3, (options.SETS_COLD, options.SETS_WARM)),
    ([], "small", options.RUN_ROUNDS, (options.SETS_COLD, options.SETS_WARM)),
    (["--cycles", "0"], "small", options.RUN_ROUNDS, (options.RUN_COLD, options.RUN_WARM)),
    (["--quick"], "tiny", None, (flags.QUICK_COLD, flags.QUICK_WARM)),
])
def test_fwbench_run_plans_by_device(argv, preset, rounds, cold_warm, monkeypatch, tmp_path):
    seen = {}

    def fake_run(opts, out, progress):
        seen["opts"] = opts
        return []
    monkeypatch.setattr(sets, "run", fake_run)
    monkeypatch.setattr(checkout, "installed", lambda f: True)
    assert cli.main(["run", "--framework", "torch", "--no-report", "--out", str(tmp_path), *argv]) == 0
    opts = seen["opts"]
    assert (opts.preset, opts.rounds, (opts.cold, opts.warm)) == (preset, rounds, cold_warm)
    assert opts.precision is None or "--precision" in argv      # each process takes its device's default


# ----------------------------------------------------------------------------- 2. FLOPs by hand

def test_gpt_tiny_train_step_flops_by_hand():
    # tiny: T = 32 context, V = 256, L = 2 layers, C = 64, batch 2. Written out from GPT-2's layers,
    # not from workloads.gpt: per layer ln_1, ln_2 (gain + bias), c_attn C x 3C + 3C, c_proj C x C + C,
    # c_fc C x 4C + 4C, mlp c_proj 4C x C + C; ln_f; the token embedding (also the head, V x C).
    T, V, L, C, B = 32, 256, 2, 64, 2
    per_layer = 2 * 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C)
    N = L * per_layer + 2 * C + V * C                     # without the position embedding (a lookup)
    assert N == 116_480
    attention = 2 * 2 * L * C * T      # per token: q k^T and a v, each C x T multiply-adds per layer, 2 FLOPs each
    forward_per_token = 2 * N + attention
    by_hand = B * T * 3 * forward_per_token               # train step: forward + backward (2x forward)
    spec = gpt.task_spec(gpt.preset("tiny").config, B, "train_step", seed=0)
    assert spec.flops == by_hand == 47_874_048 and spec.items == B * T and spec.unit == "tokens"


def test_diffusion_tiny_train_step_flops_by_hand():
    # tiny: 16x16 RGB, ch 16, ch_mult (1, 2), one res block per level, attention at 8x8, temb 4 ch = 64.
    # The DDPM UNet walked by hand: 2 FLOPs per multiply-add of every conv, dense and attention product.
    temb, p16, p8 = 64, 16 * 16, 8 * 8

    def conv(n, cin, cout, k=3):
        return n * k * k * cin * cout

    def res(n, cin, cout):    # conv, the time embedding's projection (once per image), conv, 1x1 shortcut
        return conv(n, cin, cout) + temb * cout + conv(n, cout, cout) + (conv(n, cin, cout, 1) if cin != cout else 0)

    def attn(n, c):           # q, k, v, proj (1x1) and q k^T, softmax(.) v over n positions
        return 4 * n * c * c + 2 * n * n * c

    macs = (16 * 64 + 64 * 64                              # time embedding MLP
            + conv(p16, 3, 16)                             # conv_in                  skip 16
            + res(p16, 16, 16)                             # level 0                  skip 16
            + conv(p8, 16, 16)                             # downsample (stride 2)    skip 16
            + res(p8, 16, 32) + attn(p8, 32)               # level 1                  skip 32
            + res(p8, 32, 32) + attn(p8, 32) + res(p8, 32, 32)            # middle
            + res(p8, 32 + 32, 32) + attn(p8, 32) + res(p8, 32 + 16, 32) + attn(p8, 32)   # up level 1
            + conv(p16, 32, 32)                            # upsample (nearest, then conv)
            + res(p16, 32 + 16, 16) + res(p16, 16 + 16, 16)                # up level 0
            + conv(p16, 16, 3))                            # conv_out
    B = diffusion.preset("tiny").batch
    spec = diffusion.task_spec(diffusion.preset("tiny").config, B, "train_step", seed=0)
    assert spec.flops == 3 * 2 * B * macs and spec.unit == "images"


# ----------------------------------------------------------------------------- 2. MFU in records

def test_mfu_fields_from_the_median_and_the_peaks():
    f = gemm.mfu_fields(flops=6e9, items=64, unit="tokens", median_s=0.5, peak=24e9, vendor=None)
    assert f == {"items_per_s": 128.0, "model_flops_per_s": 12e9, "mfu": 0.5, "mfu_vendor": None}
    assert gemm.mfu_fields(6e9, 64, "tokens", None, 24e9, 48e9)["mfu"] is None     # not timed


@pytest.mark.parametrize("model, kind, peak", [
    ("NVIDIA H200", "bf16", 989.5e12), ("NVIDIA H100 80GB HBM3", "tf32", 494.5e12),
    ("NVIDIA H100 PCIe", "bf16", 756e12), ("NVIDIA A100-SXM4-80GB", "fp32", 19.5e12),
    ("NVIDIA GeForce RTX 4090", "bf16", None), (None, "fp32", None),
])
def test_vendor_peaks_by_gpu_model(model, kind, peak):
    assert gemm.vendor_peak(model, kind) == peak


def test_tf32_is_the_peak_of_fp32_cases_on_an_accelerator_at_matmul_precision_tf32():
    from workloads.precision import peak_kind
    assert peak_kind("fp32", "tf32", "cuda:0") == "tf32"
    assert peak_kind("fp32", "tf32", "cpu") == "fp32"
    assert peak_kind("fp32", "highest", "cuda:0") == "fp32"
    assert peak_kind("bf16", "tf32", "cuda:0") == "bf16"


def test_a_record_states_items_per_s_and_mfu(benchmark, monkeypatch):
    from tests.test_harness import FakeAdapter
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    s = harness.Session(harness.Options(frameworks=("torch",), workloads=("gpt",), preset="tiny", rounds=7))
    rec = harness.run_case(benchmark, s, Case("torch", "gpt", "train_step", "eager"))
    assert record_mod.problems(rec) == []
    median = benchmark.stats.stats.median
    assert rec["peak_precision"] == "fp32" and rec["peak_flops"] == max(s.gemm_samples[0].values()) > 0
    assert rec["vendor_peak_flops"] is None and rec["mfu_vendor"] is None           # a CPU: no vendor peak
    assert math.isclose(rec["items_per_s"], rec["items"] / median)
    assert math.isclose(rec["mfu"], rec["flops"] / median / rec["peak_flops"])
    assert 0 < rec["mfu"] < 1 and benchmark.extra_info["mfu"] == rec["mfu"]


def test_a_bf16_peak_the_framework_cannot_measure_leaves_mfu_null_and_says_why(benchmark, monkeypatch):
    from tests.test_harness import FakeAdapter
    fake = FakeAdapter()                 # no cast(): its bf16 GEMM cannot be measured
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    s = harness.Session(harness.Options(frameworks=("torch",), workloads=("gpt",), preset="tiny", rounds=7))
    rec = harness.run_case(benchmark, s, Case("torch", "gpt", "train_step", "eager", precision="bf16"))
    assert rec["peak_flops"] is None and rec["mfu"] is None and rec["peak_source"].startswith("not measured")
    assert rec["items_per_s"] > 0


@pytest.mark.parametrize("name", ["torch", "jax", "tensorflow"])
def test_each_framework_measures_its_bf16_peak_on_the_cpu(name):
    try:
        adapter = frameworks.load(name)
    except frameworks.FrameworkUnavailable as e:
        pytest.skip(str(e))
    x = adapter.cast(adapter.asarray(np.ones((2, 2), np.float32), "cpu"), "bf16")
    assert "bfloat16" in str(x.dtype)                        # the GEMM's inputs are in the policy's dtype
    rate, how = gemm.measure_peak(adapter, "cpu", "bf16", repeats=1)
    assert rate > 0 and how.startswith(f"{name} bf16 1024x1024 matmul on cpu")


# ----------------------------------------------------------------------------- 2. the report's table

def test_the_report_shows_ms_throughput_and_mfu_per_device(tmp_path):
    import reports
    from reports.conclusions import replicates
    from reports.rendering import document
    from tests.support.reports_fixtures import record, result_json, times, write
    # GPT-2 on an H200: 12 x 1024 tokens, flops of one step, 40 ms; bf16 measured peak 700 TFLOP/s
    flops = 12 * 1024 * 6 * 85e6
    gpu = record("torch", "train_step", "compiled", preset="gpt2", device="cuda:0", placement="cuda", items=12 * 1024,
                 flops=flops, precision="bf16", peak_precision="bf16", peak_flops=700e12, vendor_peak_flops=989.5e12)
    cpu = record("torch", "train_step", "eager", flops=1e9, peak_precision="fp32", peak_flops=5e10)
    write(tmp_path / "gpu.json", result_json([(gpu, times(0.040, seed=1))], device="cuda",
                                             accelerator="NVIDIA H200"))
    write(tmp_path / "cpu.json", result_json([(cpu, times(0.5, seed=2))]))
    cases = replicates.cases(reports.load(tmp_path))
    blocks = document.mfu_blocks(cases)
    heads = [b[2] for b in blocks if b[0] == "h"]
    assert heads == ["Throughput and MFU on the CPU", "Throughput and MFU on the GPU"]
    tables = {b[3]: b[1] for b in blocks if b[0] == "table"}
    g = tables["mfu-cuda"].iloc[0]
    med = float(cases.loc[cases["device"] == "cuda:0", "median_s"].iloc[0])     # about 40 ms
    assert g["step"] == f"{1e3 * med:.3g} ms" and g["throughput"].endswith("tokens/s")
    assert g["MFU (measured peak)"] == f"{100 * flops / med / 700e12:.2g}%"
    assert g["MFU (vendor peak)"] == f"{100 * flops / med / 989.5e12:.2g}%" and g["precision"] == "bf16"
    c = tables["mfu-cpu"].iloc[0]
    assert c["MFU (vendor peak)"] == "n/a" and c["MFU (measured peak)"] != "n/a" and c["peak"].endswith("fp32")


def test_an_older_file_without_peaks_shows_mfu_as_na(tmp_path):
    import reports
    from reports.conclusions import replicates
    from reports.rendering import document
    from tests.support.reports_fixtures import record, result_json, times, write
    write(tmp_path / "old.json", result_json([(record("torch", "forward", "eager"), times(0.1))]))
    t = document.mfu_table(replicates.cases(reports.load(tmp_path)))
    assert t.iloc[0]["MFU (measured peak)"] == "n/a" and t.iloc[0]["peak"] == "not measured"


# ----------------------------------------------------------------------------- 3. one GEMM instrument

def test_the_cpu_gemm_rates_and_the_peaks_are_one_instrument(monkeypatch):
    """Each framework's rate in measure_gemm_rates (machine_info's gemm_flops on the CPU, the
    fp32 peak of CPU records) is measure_peak's, at the CPU's fp32 size; numpy's BLAS beside it."""
    from tests.test_harness import FakeAdapter
    calls = []

    def peak(adapter, device, precision, repeats=5, n=None):
        calls.append((adapter.name, device, precision, n))
        return 1.25e11, "fake"
    monkeypatch.setattr(gemm, "measure_peak", peak)
    monkeypatch.setattr(gemm, "measure_gemm_flops", lambda n, repeats, threads: 1e11)
    fake = FakeAdapter()
    rates = gemm.measure_gemm_rates(1, [fake], n=64, repeats=1)
    assert rates == {"numpy": 1e11, fake.name: 1.25e11}
    assert calls == [(fake.name, "cpu", "fp32", 64)]


def test_the_accelerator_gemm_is_the_best_fp32_kind_peak_the_cases_measured(monkeypatch):
    """On an accelerator machine_info's gemm_flops is the best peak at the fp32 cases' kind
    (tf32 at --matmul-precision tf32) from the session's peaks; never a bf16 or CPU one; measured
    by measure_peak only where no case measured it."""
    peaks = {("torch", "cuda", "fp32"): (5.0e13, "torch fp32"), ("jax", "gpu", "fp32"): (5.2e13, "jax fp32"),
             ("jax", "gpu", "bf16"): (7e14, "jax bf16"), ("torch", "cuda", "tf32"): (4e14, "torch tf32"),
             ("torch", "cpu", "fp32"): (9e14, "a CPU")}
    opts = harness.Options(frameworks=("torch", "jax"), workloads=("gpt",), device="cuda")
    assert gemm.accelerator_gemm(opts, {"torch": {}, "jax": {}}, peaks) == (5.2e13, "jax fp32")
    tf32 = harness.Options(frameworks=("torch",), workloads=("gpt",), device="cuda", matmul_precision="tf32")
    assert gemm.accelerator_gemm(tf32, {"torch": {}}, peaks) == (4e14, "torch tf32")
    monkeypatch.setattr(frameworks, "load", lambda name: (_ for _ in ()).throw(AssertionError("measured again")))
    gemm.accelerator_gemm(opts, {"torch": {}}, peaks)          # from the peaks: nothing loaded


def test_utilisation_divides_by_the_gemm_rate_at_the_cases_precision(tmp_path):
    """A bf16 case's utilisation is against the bf16 rate, an fp32 case's against the best fp32
    rate on the set-up (its peak or the run's gemm_flops, the same instrument); a bf16 record
    from before peaks has no utilisation (its file's only rate was fp32's); an older fp32 one
    divides by gemm_flops as it did."""
    import reports
    from reports.conclusions import replicates
    from tests.support.reports_fixtures import record, result_json, times, write
    bf = record("torch", "forward", "eager", flops=1e9, precision="bf16", peak_precision="bf16", peak_flops=2e10)
    fp = record("torch", "forward", "compiled", flops=1e9, peak_precision="fp32", peak_flops=4e10)
    old_bf = record("jax", "forward", "eager", flops=1e9, precision="bf16")
    old_fp = record("jax", "forward", "compiled", flops=1e9)
    write(tmp_path / "a.json", result_json([(bf, times(0.1, seed=1)), (fp, times(0.05, seed=2))], gemm_flops=5e10))
    write(tmp_path / "b.json", result_json([(old_bf, times(0.1, seed=3)), (old_fp, times(0.05, seed=4))],
                                           frameworks=("jax",), gemm_flops=3e10))
    df = replicates.cases(reports.load(tmp_path)).set_index(["framework", "mode"])
    for key, rate in ((("torch", "eager"), 2e10), (("torch", "compiled"), 5e10), (("jax", "compiled"), 5e10)):
        r = df.loc[key]
        assert r["util_peak_flops"] == rate
        assert math.isclose(r["utilisation"], 1e9 / r["median_s"] / rate)
    assert math.isnan(df.loc[("jax", "eager"), "utilisation"])


def test_the_gemm_size_is_2048_unless_fwbench_gemm_n_says_otherwise(monkeypatch):
    monkeypatch.delenv(gemm.GEMM_N_ENV, raising=False)
    assert gemm.gemm_n() == gemm.GEMM_N == 2048
    monkeypatch.setenv(gemm.GEMM_N_ENV, "256")
    assert gemm.gemm_n() == 256
    monkeypatch.setenv(gemm.GEMM_N_ENV, "-3")
    with pytest.raises(frameworks.FwbenchError, match=r"^FWBENCH_GEMM_N='-3': the GEMM size must be a positive"):
        gemm.gemm_n()
