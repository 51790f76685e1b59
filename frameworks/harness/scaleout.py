"""A data-parallel case's extra steps: the check against one device before it is timed
(parallel_check) and what one step communicates after (collectives_record); the
data-parallel check in a process of its own (frameworks/scaleout_check.py) uses both."""
from __future__ import annotations

import json
from typing import Any

import numpy as np

import frameworks
import workloads
from workloads import parallel
from workloads.base import WrongResult
from workloads.case import Case, Placement


def collectives_record(model: Any, pool: list[tuple[Any, ...]], params: dict[str, np.ndarray],
                       case: Case) -> dict[str, Any]:
    """What one data-parallel step communicates, by the framework's own account
    (model.collectives, one more step after the timed rounds), beside the analytic gradient
    bytes (workloads.parallel.gradient_bytes) and both as bytes on a ring per device
    (workloads.parallel.wire_bytes, analytic_wire_bytes)."""
    coll = dict(model.collectives(*pool[0]))
    source, why = coll.pop("source"), coll.pop("reason", None)
    n = case.placement.devices
    wire = parallel.wire_bytes(coll, n)
    analytic = parallel.analytic_wire_bytes(params, n, case.strategy)
    state, state_source = model.device_state()
    return {"pinning": model.pinning, "collectives": json.dumps(coll, sort_keys=True) if coll else None,
            "device_state_bytes": state, "device_state_source": state_source,
            "collectives_source": source or why,
            "allreduce_bytes": coll.get("all-reduce", {}).get("bytes"),
            "allreduce_count": coll.get("all-reduce", {}).get("count"),
            "analytic_allreduce_bytes": parallel.gradient_bytes(params),
            "wire_bytes": None if wire is None else int(round(wire)),
            "analytic_wire_bytes": None if analytic is None else int(round(analytic))}


def against_one_device(adapter: frameworks.Adapter, case: Case, config: Any, params: dict[str, np.ndarray],
                       inputs: Any) -> tuple[parallel.Equivalence, Any]:
    """A fresh one-device model and a fresh data-parallel one of `case`, from the same
    parameters, compared on the same global batches (workloads.parallel.check: the first
    step's reduced gradients, then the parameters after CHECK_STEPS steps); returns the
    differences and the data-parallel model."""
    single = adapter.build(case.but(placement=Placement(case.placement.kind),
                                    strategy=parallel.one_device_strategy(case.strategy)), config, params)
    dp = adapter.build(case, config, params)
    batches = [tuple(adapter.asarray(a, case.device) for a in inp) for inp in inputs]
    return parallel.check(single, dp, batches, dp.place_inputs), dp


def parallel_check(adapter: frameworks.Adapter, case: Case, p: Any, spec: Any, seed: int) -> dict[str, Any]:
    """Before a data-parallel case is timed: a fresh data-parallel model against a fresh
    one-device model, the first step's reduced gradients and the parameters after
    workloads.parallel.CHECK_STEPS AdamW steps on the same global batches. WrongResult past
    GRAD_RTOL or CHECK_RTOL (workloads.parallel.failure: the case is recorded failed and never
    timed)."""
    if case.strategy == parallel.NO_SYNC:
        return {"dp_check_note": "not compared with one device: the no-sync step leaves its gradients "
                                 "unsynchronised by design (a timing probe, not a training step)"}
    params = workloads.get(case.workload).init_params(p.config, seed=seed)
    eq, _ = against_one_device(adapter, case, p.config, params, spec.inputs)
    out = {"dp_check_rel": eq.rel, "dp_check_rtol": parallel.CHECK_RTOL[case.workload],
           "dp_check_grad_rel": eq.grad_rel, "dp_check_grad_rtol": parallel.GRAD_RTOL[case.workload]}
    why = parallel.failure(case.workload, case.placement.devices, eq)
    if why:
        raise WrongResult(why, record_extra=out)
    return out
