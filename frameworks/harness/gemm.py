"""The machine's fp32 GEMM rate, the denominator of every utilisation: on the CPU by numpy's
BLAS and each framework's own matmul at the thread count in force (measured before the first
case and after the last; the best counts), on an accelerator by the first framework that
sees it."""
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

GEMM_N = 2048


def measure_gemm_flops(n: int = GEMM_N, repeats: int = 5, threads: int | None = None) -> float:
    """numpy's fp32 matrix-multiply rate on the CPU: the best of `repeats` n x n float32
    products (BLAS), after one warm-up, with BLAS limited to `threads` (threadpoolctl: numpy's
    BLAS sizes its pool when numpy is imported, usually before fwbench sets the count)."""
    from threadpoolctl import threadpool_limits
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


def measure_gemm_rates(threads: int, adapters: list[frameworks.Adapter], n: int = GEMM_N,
                       repeats: int = 5) -> dict[str, float]:
    """The CPU's fp32 GEMM rate at `threads` threads by every library at hand: numpy's BLAS
    and each adapter's own matmul (MKL/oneDNN for PyTorch, XLA for JAX and TensorFlow), n x n,
    best of `repeats`. Utilisation divides by the best of them (no library's rate understates
    what the machine can do), and every rate is recorded."""
    rates = {"numpy": measure_gemm_flops(n, repeats, threads)}
    x = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    for a in adapters:
        try:
            xa, mm = a.asarray(x, "cpu"), a.matmul_fn()
            rates[a.name] = 2.0 * n ** 3 / _best_time(lambda: a.sync(mm(xa, xa)), repeats)
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
            "gemm_note": (f"float32 {GEMM_N}x{GEMM_N} matmul at the thread count in force, best of 5, by "
                          f"{', '.join(rates)}; best of {len(samples)} such measurements ({when}); "
                          f"fastest: {best}")}


def accelerator_gemm(opts: Options, fws: dict[str, Any]) -> tuple[float | None, str | None]:
    """fp32 GEMM rate on the accelerator, measured with the first framework that sees it
    (no framework-neutral GEMM exists on a GPU), at the matmul precision in force."""
    for name in fws:
        a = frameworks.load(name)
        try:
            device = resolve_device(a, opts.device)
        except FwbenchError:
            continue
        n = 8192
        x = a.asarray(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32), device)
        mm = a.matmul_fn()
        a.sync(mm(x, x))
        best = math.inf
        for _ in range(10):
            t0 = time.perf_counter()
            a.sync(mm(x, x))
            best = min(best, time.perf_counter() - t0)
        return 2.0 * n ** 3 / best, (f"{name} float32 {n}x{n} matmul on {device}, best of 10, "
                                     f"precision {opts.matmul_precision}")
    return None, "no framework sees the accelerator"


# ----------------------------------------------------------------------------- peaks for MFU

# Dense (no sparsity) tensor peaks in FLOP/s from the vendors' datasheets, by a name the GPU's
# model name contains (first match wins: H100 PCIe before H100). The datasheets state bf16 and
# TF32 "with sparsity": the dense rate is half of it. NVIDIA H100 Tensor Core GPU datasheet
# (H100 SXM: FP32 67 TF, TF32 989 TF*, BF16 1979 TF*; H100 PCIe: 51 / 756* / 1513*), NVIDIA H200
# datasheet (H200 SXM: 67 / 989* / 1979*), NVIDIA A100 datasheet (19.5 / 156 / 312, dense).
VENDOR_PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"fp32": 51e12, "tf32": 378e12, "bf16": 756e12}),
    ("H100", {"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12}),
    ("H200", {"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12}),
    ("A100", {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12}),
)
PEAK_N = {"cpu": 1024, "accelerator": 8192}     # the GEMM size of a peak measurement (bf16 on a CPU
                                                # without native instructions is emulated: slow)


def peak_kind(precision: str, matmul_precision: str, device: str) -> str:
    """The precision a case's products run at, as the peaks name it: bf16, fp32, or tf32 (fp32
    cases on an accelerator at --matmul-precision tf32; a CPU has no TF32)."""
    if precision == "fp32" and matmul_precision == "tf32" and device != "cpu":
        return "tf32"
    return precision


def vendor_peak(gpu_model: str | None, kind: str) -> float | None:
    """The vendor's dense peak of `kind` for the GPU named `gpu_model`, or None (a CPU, a GPU
    not in VENDOR_PEAKS, a precision it does not list)."""
    for name, peaks in VENDOR_PEAKS:
        if gpu_model and name.lower() in gpu_model.lower():
            return peaks.get(kind)
    return None


def measure_peak(adapter: frameworks.Adapter, device: str, precision: str, repeats: int = 5) -> tuple[float, str]:
    """The framework's own n x n GEMM rate on `device` with both inputs in `precision`'s compute
    dtype, at the matmul precision in force (best of `repeats`, after one warm-up), and how it
    was measured: the denominator of MFU at that precision."""
    n = PEAK_N["cpu" if device == "cpu" else "accelerator"]
    x = adapter.cast(adapter.asarray(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32), device),
                     precision)
    mm = adapter.matmul_fn()
    rate = 2.0 * n ** 3 / _best_time(lambda: adapter.sync(mm(x, x)), repeats)
    return rate, f"{adapter.name} {precision} {n}x{n} matmul on {device}, best of {repeats}"


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
