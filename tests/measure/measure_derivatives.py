"""Print the error every derivatives case achieves against its float64 reference, per
framework, mode, task and strategy, and the worst per problem: the numbers
workloads.derivatives.TOL is set from (about ten times the worst).

    python -m tests.measure.measure_derivatives                 # tiny preset, every case
    python -m tests.measure.measure_derivatives small jax       # the small preset, some frameworks
    python -m tests.measure.measure_derivatives small jax gpt   # ... the tasks whose name holds "gpt"

Each line also gives the first call's and the second call's seconds (indicative: the inputs
of a smoke estimate of the matrix's time, not measurements).
"""
from __future__ import annotations

import sys
import time

import frameworks
from workloads import derivatives as D


def main(preset: str, names: tuple[str, ...] | None, only: str = "") -> None:
    cfg = D.preset(preset).config
    params = D.init_params(cfg)
    worst: dict[tuple[str, str], float] = {}
    for fw, adapter in frameworks.status(names).items():
        if isinstance(adapter, str):
            print(fw, "missing:", adapter)
            continue
        for mode in adapter.modes:
            for task in (t for t in D.tasks(cfg) if only in t):
                spec = D.task_spec(cfg, 1, task)
                for strategy in D.strategies(fw, mode, task):
                    model = adapter.build("derivatives", cfg, params, mode, "cpu", strategy=strategy)
                    inputs = [adapter.asarray(a, "cpu") for a in spec.inputs[0]]
                    try:
                        t0 = time.perf_counter()
                        out = adapter.to_numpy(getattr(model, spec.method)(*inputs, **spec.kwargs))
                        t1 = time.perf_counter()
                        adapter.sync(getattr(model, spec.method)(*inputs, **spec.kwargs))
                        t2 = time.perf_counter()
                    except Exception as e:  # noqa: BLE001  report and go on
                        print(fw, mode, task, strategy, "ERROR", type(e).__name__, str(e).splitlines()[0][:200])
                        continue
                    err, where = spec.check.error(out)
                    print(fw, mode, task, strategy, f"{err:.2e}{where}" if isinstance(err, float) else err,
                          f"first {t1 - t0:.2f} s, second {t2 - t1:.3f} s", flush=True)
                    if isinstance(err, float):
                        key = (spec.check.tol_key, fw)
                        worst[key] = max(worst.get(key, 0.0), err)
    for key in D.TOL:
        print(key, "worst:", ", ".join(f"{fw} {worst[(key, fw)]:.1e}" for fw in frameworks.names()
                                       if (key, fw) in worst), f"(TOL {D.TOL[key]:.0e})")


if __name__ == "__main__":
    args = sys.argv[1:]
    only = args.pop() if len(args) > 1 and args[-1] not in frameworks.names() else ""
    main(args[0] if args else "tiny", tuple(args[1:]) or None, only)
