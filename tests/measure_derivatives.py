"""Print the error every derivatives case achieves against its float64 reference, per
framework, mode, task and strategy, and the worst per problem: the numbers
workloads.derivatives.TOL is set from (about ten times the worst).

    python -m tests.measure_derivatives                 # tiny preset, every case
    python -m tests.measure_derivatives small jax       # the small preset, some frameworks
"""
from __future__ import annotations

import sys

import frameworks
from workloads import derivatives as D


def main(preset: str, names: tuple[str, ...] | None) -> None:
    cfg = D.preset(preset).config
    worst: dict[tuple[str, str], float] = {}
    for fw, adapter in frameworks.status(names).items():
        if isinstance(adapter, str):
            print(fw, "missing:", adapter)
            continue
        for mode in adapter.modes:
            for task in D.tasks(cfg):
                spec = D.task_spec(cfg, 1, task)
                for strategy in D.strategies(fw, mode, task):
                    model = adapter.build("derivatives", cfg, {}, mode, "cpu", strategy=strategy)
                    inputs = [adapter.asarray(a, "cpu") for a in spec.inputs[0]]
                    try:
                        out = adapter.to_numpy(getattr(model, spec.method)(*inputs, **spec.kwargs))
                    except Exception as e:  # noqa: BLE001  report and go on
                        print(fw, mode, task, strategy, "ERROR", type(e).__name__, str(e).splitlines()[0][:200])
                        continue
                    err, where = spec.check.error(out)
                    print(fw, mode, task, strategy, f"{err:.2e}{where}" if isinstance(err, float) else err, flush=True)
                    if isinstance(err, float):
                        key = (D.problem_of(task)[0], fw)
                        worst[key] = max(worst.get(key, 0.0), err)
    for problem in D.PROBLEMS:
        print(problem, "worst:", ", ".join(f"{fw} {worst[(problem, fw)]:.1e}" for fw in frameworks.names()
                                           if (problem, fw) in worst), f"(TOL {D.TOL[problem]:.0e})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tiny", tuple(sys.argv[2:]) or None)
