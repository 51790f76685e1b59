"""The data-parallel equivalence and collective check in a process of its own (a placement is
fixed per process: simulated devices are made before the framework starts):

    python -m frameworks.scaleout_check torch gpt 2 [--mode eager] [--strategy sharded] [--preset tiny]
                                        [--mutate sum|shard] [--out params.npz]

Builds the workload's one-device model and its data-parallel form on N simulated CPU
devices from the same numpy parameters, compares the data-parallel step's reduced gradients
(before clipping) on the first global batch with the one-device gradients (`grad_rel`), runs
workloads.parallel.CHECK_STEPS AdamW steps of both on the same global batches (N x the
preset's batch: weak scaling), and prints one JSON line: both errors and their bounds, the
check's `failure` (None when it passes), the collectives of one step by the framework's own
account, the analytic gradient all-reduce, and the seconds it took. --mutate breaks the
step on purpose (workloads.parallel.MUTATIONS: gradients summed instead of averaged, or
every device given device 0's rows); the check must then fail. --out saves the
data-parallel parameters afterwards (the tests compare the three frameworks'). tests/
test_scaleout.py runs it; so can a user on a machine with N accelerators (--device cuda,
real devices).
"""
from __future__ import annotations

import argparse
import json
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m frameworks.scaleout_check")
    ap.add_argument("framework")
    ap.add_argument("workload")
    ap.add_argument("devices", type=int)
    ap.add_argument("--mode", default="eager")
    ap.add_argument("--strategy", default=None, help="a data-parallel strategy (workloads.parallel."
                    "PARALLEL_STRATEGIES: sharded, no-sync) or a train-step recipe; default: data parallel")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="threads per device (default 1)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--mutate", choices=("sum", "shard"), default=None,
                    help="a mutation of the data-parallel step the check must catch (workloads.parallel.MUTATIONS)")
    args = ap.parse_args(argv)
    if args.devices < 2:
        ap.error("data parallel needs 2 devices or more")
    t0 = time.monotonic()
    if args.mutate:    # before any model is built: torch's worker ranks inherit it
        import os
        os.environ["FWBENCH_DP_MUTATION"] = args.mutate
    from frameworks.base import prepare_placement, process_threads
    per = prepare_placement(args.devices, args.device == "cpu", args.device, args.threads)

    import numpy as np

    import frameworks
    import workloads
    from frameworks.harness.scaleout import against_one_device, collectives_record
    from workloads import parallel
    from workloads.case import Case, Placement
    adapter = frameworks.load(args.framework)
    adapter.configure(process_threads(per, args.devices))
    W = workloads.get(args.workload)
    p = W.preset(args.preset)
    params = W.init_params(p.config, seed=0)
    case = Case(args.framework, args.workload, "train_step", args.mode, args.strategy,
                placement=Placement(args.device, args.devices, args.device == "cpu"))
    spec = W.task_spec(p.config, p.batch * args.devices, "train_step", seed=0)
    eq, dp = against_one_device(adapter, case, p.config, params, spec.inputs)
    if args.out:
        np.savez(args.out, **dp.export_params())
    placed = dp.place_inputs(*(adapter.asarray(a, args.device) for a in spec.inputs[0]))
    rec = collectives_record(dp, [placed], params, case)       # what the harness records
    coll = {"source": rec["collectives_source"], **json.loads(rec["collectives"] or "{}")}
    print(json.dumps({"framework": args.framework, "workload": args.workload, "mode": args.mode,
                      "strategy": args.strategy,
                      "devices": args.devices, "mutation": parallel.mutation(),
                      "grad_rel": eq.grad_rel, "grad_rtol": parallel.GRAD_RTOL[args.workload],
                      "rel": eq.rel, "rtol": parallel.CHECK_RTOL[args.workload],
                      "failure": parallel.failure(args.workload, args.devices, eq),
                      "collectives": coll,
                      **{k: rec[k] for k in ("analytic_allreduce_bytes", "wire_bytes", "analytic_wire_bytes",
                                             "pinning", "device_state_bytes", "device_state_source")},
                      "seconds": time.monotonic() - t0}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
