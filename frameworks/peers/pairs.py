"""One framework's pairs, in this process: for every workload, task and mode, fwbench's side
(built as the harness builds a case) and the peer's, their first outputs compared, then timed."""
from __future__ import annotations

import argparse
import importlib
from typing import Any

import numpy as np

import workloads
from frameworks.peers import TOLERANCE, timing
from workloads.base import FwbenchError, Unsupported, error_line
from workloads.case import Case, Placement

# workload -> the module of its peers (each has SIDES: framework -> builder, and LIBRARY)
PEER_MODULES = {"gpt": "frameworks.peers.gpt", "diffusion": "frameworks.peers.diffusion"}
NO_PEER = {"diffusion": "no peer: diffusers' UNet2DModel is PyTorch only (its Flax UNet is text-conditional, "
                        "and it has no TensorFlow one)"}


def fwbench_side(adapter: Any, workload: str, task: str, mode: str, cfg: Any, params: dict[str, np.ndarray],
                 spec: Any, device: str, precision: str) -> timing.Side:
    """fwbench's model of the case, called on the task's first inputs as the harness calls it
    (waiting for the model's state too where the call updates it)."""
    case = Case(adapter.name, workload, task, mode, precision=precision, placement=Placement(device))
    model = adapter.build(case, cfg, params)
    dev = adapter.own_device(device)
    args = tuple(adapter.asarray(a, dev) for a in spec.inputs[0])
    fn, kwargs = getattr(model, spec.method), dict(spec.kwargs)
    state = model.state if spec.mutates else None    # JAX's: parameters and optimizer state

    def sync(v: Any) -> None:
        adapter.sync(v if state is None else (v, state()))
    return timing.Side(f"fwbench {adapter.name}", lambda: fn(*args, **kwargs), sync, adapter.to_numpy)


def peer_inputs(workload: str, spec: Any) -> dict[str, Any]:
    """The peer builder's input keywords, from the task's first inputs."""
    if workload == "gpt":
        tokens = spec.inputs[0][0]
        targets = spec.inputs[0][1] if len(spec.inputs[0]) > 1 else tokens
        return {"tokens": tokens, "targets": targets}
    return {"inputs": spec.inputs[0]}


def pair(adapter: Any, workload: str, task: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One row: the pair built, checked and timed, or the reason it was not."""
    fw = adapter.name
    row: dict[str, Any] = {"framework": fw, "workload": workload, "task": task, "mode": mode,
                           "preset": args.presets[workload], "precision": args.precision}
    W = workloads.get(workload)
    module = importlib.import_module(PEER_MODULES[workload])
    if fw not in module.SIDES:
        return {**row, "status": "no peer", "reason": NO_PEER[workload]}
    row["peer"] = module.LIBRARY[fw]
    p = W.preset(args.presets[workload])
    params = W.init_params(p.config, seed=args.seed)
    spec = W.task_spec(p.config, p.batch, task, seed=args.seed)
    try:
        ours = fwbench_side(adapter, workload, task, mode, p.config, params, spec, args.device, args.precision)
        peer = module.SIDES[fw](p.config, params, task, mode, device=args.device, precision=args.precision,
                                **peer_inputs(workload, spec))
    except ImportError as e:
        return {**row, "status": "not run", "reason": f"{e.name or e} is not installed (pip install -e '.[peers]')"}
    except Unsupported as e:
        return {**row, "status": "not run", "reason": str(e)}
    except Exception as e:  # noqa: BLE001  one pair's failure is its row, the others go on
        return {**row, "status": "failed", "reason": error_line(e)}
    n = 2 if W.task_spec(p.config, p.batch, task).mutates else 1      # a train step: its first two losses
    try:
        diff = timing.difference(timing.first_outputs(ours, n), timing.first_outputs(peer, n))
    except Exception as e:  # noqa: BLE001
        return {**row, "status": "failed", "reason": error_line(e)}
    row.update(difference=diff, tolerance=TOLERANCE[args.precision], note=peer.note)
    if not diff <= TOLERANCE[args.precision]:
        return {**row, "status": "outputs differ",
                "reason": f"difference {diff:.2e} over the tolerance {TOLERANCE[args.precision]:.0e}: not timed"}
    result = timing.interleaved(ours, peer, args.rounds, args.block_s, seed=args.seed)
    row.update(status="ok", ratio=result.ratio, low=result.low, high=result.high, fwbench_s=result.fwbench_s,
               peer_s=result.peer_s, rounds=result.rounds, calls=result.calls,
               ratios=[round(r, 5) for r in result.ratios])
    print(f"peers: {fw} {workload} {task} {mode}: {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}] "
          f"(difference {diff:.1e})", flush=True)
    return row


def run_framework(framework: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every pair of `framework` (its modes, or those --modes names that it has)."""
    import frameworks
    try:
        adapter = frameworks.load(framework)
    except FwbenchError as e:
        return [{"framework": framework, "status": "not run", "reason": str(e)}]
    adapter.configure(args.threads)
    modes = [m for m in adapter.modes if args.modes is None or m in args.modes.split(",")]
    rows = []
    with adapter.own_precision():
        for workload in args.workloads:
            for task in args.tasks:
                for mode in modes:
                    rows.append(pair(adapter, workload, task, mode, args))
    return rows
