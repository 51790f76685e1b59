"""The GEMM rate at a precision, one instrument (measure_peak) for both figures that divide by
it: utilisation (reports: the best rate measured on the machine set-up at the case's precision)
and each record's MFU (peak_flops). On the CPU at fp32 the rate is also numpy's BLAS, and the
best of numpy's and every framework's, at the thread count in force, measured before the first
case and after the last, is machine_info's gemm_flops; on an accelerator gemm_flops is the best
fp32 peak (tf32 at --matmul-precision tf32) the frameworks measured, by the same instrument."""
from __future__ import annotations

import math
import os
import time
from typing import Any, Callable

import numpy as np

import frameworks
from frameworks.base import available_cpus
from frameworks.harness.options import Options, resolve_device
from workloads.base import FwbenchError
from workloads.precision import POLICIES, peak_kind

GEMM_N = 2048
GEMM_N_ENV = "FWBENCH_GEMM_N"


def gemm_n() -> int:
    """The size of the CPU's fp32 GEMM rate (n x n): GEMM_N, or FWBENCH_GEMM_N where set. At 2048
    a rate takes about 1.1 s per library on one core, sampled twice per process by numpy and the
    framework: 4.6 s of a benchmark process. The test suite, which judges no rate, sets 256
    (tests/conftest.py); the record's gemm_note names the size."""
    text = os.environ.get(GEMM_N_ENV, "").strip()
    if not text:
        return GEMM_N
    if not text.isdigit() or int(text) < 1:
        raise FwbenchError(f"{GEMM_N_ENV}={text!r}: the GEMM size must be a positive integer (default {GEMM_N})")
    return int(text)


def measure_gemm_flops(n: int | None = None, repeats: int = 5, threads: int | None = None) -> float:
    """numpy's fp32 matrix-multiply rate on the CPU: the best of `repeats` n x n float32
    products (BLAS; n: gemm_n()), after one warm-up, with BLAS limited to `threads`
    (threadpoolctl: numpy's BLAS sizes its pool when numpy is imported, usually before fwbench
    sets the count)."""
    from threadpoolctl import threadpool_limits
    n = n or gemm_n()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    with threadpool_limits(limits=threads or int(os.environ.get("FWBENCH_THREADS", 0)) or available_cpus(),
                           user_api="blas"):
        return 2.0 * n ** 3 / _best_time(lambda: a @ b, repeats)


def _best_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_gemm_rates(threads: int, adapters: list[frameworks.Adapter], n: int | None = None,
                       repeats: int = 5) -> dict[str, float]:
    """The CPU's fp32 GEMM rate at `threads` threads by every library at hand: numpy's BLAS
    and each adapter's own matmul (measure_peak: MKL/oneDNN for PyTorch, XLA for JAX and
    TensorFlow), n x n, best of `repeats`. Utilisation divides by the best of them (no
    library's rate understates what the machine can do), and every rate is recorded. n: gemm_n()."""
    n = n or gemm_n()
    rates = {"numpy": measure_gemm_flops(n, repeats, threads)}
    for a in adapters:
        try:
            rates[a.name] = measure_peak(a, "cpu", "fp32", repeats, n)[0]
        except Exception:  # noqa: BLE001  a framework that cannot multiply here: numpy's rate remains
            continue
    return rates


def cpu_gemm(threads: int, adapters: list[frameworks.Adapter], before: list[dict[str, float]]) -> dict[str, Any]:
    """machine_info's GEMM keys on the CPU: every sample (those taken before the first case
    and one now), each source's best, the best of all and how it was measured."""
    samples = [*before, measure_gemm_rates(threads, adapters)]
    rates: dict[str, float] = {}
    for sample in samples:
        for src, r in sample.items():
            rates[src] = max(rates.get(src, 0.0), r)
    best = max(rates, key=rates.get)
    when = "before the first case and after the last" if len(samples) > 1 else "after the run"
    return {"gemm_rates": rates, "gemm_samples": samples, "gemm_flops": max(rates.values()),
            "gemm_note": (f"float32 {gemm_n()}x{gemm_n()} matmul at the thread count in force, best of 5, by "
                          f"{', '.join(rates)}; best of {len(samples)} such measurements ({when}); "
                          f"fastest: {best}")}


def accelerator_gemm(opts: Options, fws: dict[str, Any], peaks: dict[tuple[str, str, str], tuple[float | None, str]]
                     ) -> tuple[float | None, str | None]:
    """machine_info's gemm_flops on an accelerator: the best peak at the fp32 cases' kind (fp32,
    or tf32 at --matmul-precision tf32) the run's frameworks measured for their records
    (`peaks`, Session.peaks), else measured now by the first framework that sees the device."""
    kind = peak_kind("fp32", opts.matmul_precision, opts.device)
    seen = [(rate, how) for (_, device, k), (rate, how) in peaks.items() if k == kind and device != "cpu" and rate]
    if seen:
        return max(seen, key=lambda p: p[0])
    for name in fws:
        a = frameworks.load(name)
        try:
            device = resolve_device(a, opts.device)
        except FwbenchError:
            continue
        return measure_peak(a, device, "fp32", repeats=10)
    return None, "no framework sees the accelerator"


# ----------------------------------------------------------------------------- peaks for MFU

# Dense (no sparsity) tensor peaks in FLOP/s from the vendors' datasheets, by a name the GPU's
# model name contains (first match wins: H100 PCIe before H100), keyed by the dtype of the
# products' inputs (a policy's `compute`, workloads/precision.py: POLICIES; "tf32" for float32
# products at matmul precision tf32), so a policy finds its peak through its compute dtype. The
# datasheets state FP16, BF16 and TF32 "with sparsity": the dense rate is half of it. NVIDIA H100
# Tensor Core GPU datasheet (H100 SXM: FP32 67 TF, TF32 989 TF*, BF16 and FP16 1979 TF*; H100
# PCIe: 51 / 756* / 1513*), NVIDIA H200 datasheet (H200 SXM: 67 / 989* / 1979*), NVIDIA A100
# datasheet (19.5 / 156 / 312, dense).
VENDOR_PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"float32": 51e12, "tf32": 378e12, "bfloat16": 756e12, "float16": 756e12}),
    ("H100", {"float32": 67e12, "tf32": 494.5e12, "bfloat16": 989.5e12, "float16": 989.5e12}),
    ("H200", {"float32": 67e12, "tf32": 494.5e12, "bfloat16": 989.5e12, "float16": 989.5e12}),
    ("A100", {"float32": 19.5e12, "tf32": 156e12, "bfloat16": 312e12, "float16": 312e12}),
)
PEAK_N = {"cpu": 1024, "accelerator": 8192}     # the GEMM size of a peak measurement (bf16 on a CPU
                                                # without native instructions is emulated: slow)


def vendor_peak(gpu_model: str | None, kind: str) -> float | None:
    """The vendor's dense peak of `kind` for the GPU named `gpu_model`, or None (a CPU, a GPU
    not in VENDOR_PEAKS, a precision it does not list). `kind`: a policy of
    workloads/precision.py (its compute dtype's column) or "tf32"."""
    column = POLICIES[kind].compute if kind in POLICIES else kind
    for name, peaks in VENDOR_PEAKS:
        if gpu_model and name.lower() in gpu_model.lower():
            return peaks.get(column)
    return None


def measure_peak(adapter: frameworks.Adapter, device: str, precision: str, repeats: int = 5,
                 n: int | None = None) -> tuple[float, str]:
    """The one GEMM instrument: the framework's own n x n matrix-multiply rate on `device` with
    both inputs in `precision`'s compute dtype, at fwbench's float32 matmul precision (the
    adapter's own_precision), best of `repeats` after one warm-up, and how it was measured.
    n: PEAK_N by device unless given (gemm_n() for the CPU's fp32 rates)."""
    n = n or PEAK_N["cpu" if device == "cpu" else "accelerator"]
    with adapter.own_precision():
        x = adapter.cast(adapter.asarray(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32), device),
                         precision)
        mm = adapter.matmul_fn()
        rate = 2.0 * n ** 3 / _best_time(lambda: adapter.sync(mm(x, x)), repeats)
    kind = peak_kind(precision, adapter.matmul_precision, device)
    return rate, f"{adapter.name} {kind} {n}x{n} matmul on {device}, best of {repeats}"


def mfu_fields(flops: float, items: float, unit: str, median_s: float | None, peak: float | None,
               vendor: float | None) -> dict[str, Any]:
    """A record's throughput and MFU: items_per_s (in `unit`: tokens, images), achieved model
    FLOP/s, and MFU against the measured peak and the vendor's (None where either is unknown)."""
    if not median_s or median_s <= 0 or not math.isfinite(median_s):
        return {"items_per_s": None, "model_flops_per_s": None, "mfu": None, "mfu_vendor": None}
    achieved = flops / median_s
    return {"items_per_s": items / median_s, "model_flops_per_s": achieved,
            "mfu": achieved / peak if peak and flops > 0 else None,
            "mfu_vendor": achieved / vendor if vendor and flops > 0 else None}
