"""One benchmark case as one value: who runs what, how, at what precision, where.

    Case(framework, workload, task, mode, strategy, precision, placement)

A Case travels unchanged from the workload's declared variants (declared_cases, read by the
pytest plugin and by the conformance test) through the harness (frameworks.harness.run_case)
and every framework's `build(adapter, config, params, case)` into the record (Case.fields).
A new axis is one field here, one column in the record, and the builds that read it; no
signature changes anywhere else. Framework-free.
"""
from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

from workloads.base import DEVICE_KINDS, choose
from workloads.framework_facts import FACTS
from workloads.precision import PRECISIONS  # the numeric policies (their names)
from workloads.record import MODES

# Every framework fwbench knows, in the order reports list them (the registry:
# workloads/framework_facts.py; the reports read it, never `frameworks`).
FRAMEWORKS = tuple(FACTS)


@dataclass(frozen=True)
class Placement:
    """Where a case runs: a device kind and how many devices of it (simulated: devices that
    share one physical device, such as host-platform CPU devices). Fixed per process: what a
    framework must do before it starts (frameworks.base.prepare_placement) depends on it.
    More than one device: the data-parallel form of the workload's PARALLEL_TASKS
    (workloads/parallel.py; frameworks/<fw>/parallel.py)."""
    kind: str = "cpu"
    devices: int = 1
    simulated: bool = False

    def __post_init__(self) -> None:
        choose("device", self.kind, DEVICE_KINDS)
        if not (isinstance(self.devices, int) and self.devices >= 1):
            raise ValueError(f"a placement has one device or more, got {self.devices!r}")

    @property
    def label(self) -> str:
        """'cpu', or 'cpu x2 (simulated)'."""
        return (self.kind + (f" x{self.devices}" if self.devices > 1 else "")
                + (" (simulated)" if self.simulated else ""))


@dataclass(frozen=True)
class Case:
    framework: str
    workload: str
    task: str | None                # None: a whole model (a library user's build)
    mode: str
    strategy: str | None = None     # a variant the workload declares; None is the default
    precision: str = "fp32"
    placement: Placement = field(default_factory=Placement)

    def __post_init__(self) -> None:
        choose("mode", self.mode, MODES)
        choose("precision", self.precision, PRECISIONS)

    @property
    def device(self) -> str:
        return self.placement.kind

    @property
    def id(self) -> str:
        """pytest's id: framework-mode-task[-strategy][-precision where not fp32][-xN on N devices]."""
        parts = [self.framework, self.mode, self.task, self.strategy,
                 self.precision if self.precision != "fp32" else None,
                 f"x{self.placement.devices}" if self.placement.devices > 1 else None]
        return "-".join(p for p in parts if p is not None)

    def but(self, **changes: Any) -> Case:
        """The same case with some fields changed: case.but(mode="eager", strategy=None)."""
        return replace(self, **changes)

    def on(self, device: str) -> Case:
        """The same case on another device kind (the framework's own name for it)."""
        return replace(self, placement=replace(self.placement, kind=device))

    def fields(self) -> dict[str, Any]:
        """The record's case columns (workloads.record.FIELDS)."""
        d = {k: v for k, v in asdict(self).items() if k != "placement"}
        d.update(device=self.device, placement=self.placement.label, n_devices=self.placement.devices)
        return d


def declared_cases(workload: str, frameworks: Iterable[str], preset: str, variants: str = "all",
                   precisions: Iterable[str] = ("fp32",), device: str = "cpu",
                   placement: Placement | None = None) -> list[Case]:
    """Every case a workload declares for these frameworks: framework x mode x task (the
    preset's task list where names carry sizes) x strategy (workloads.<name>.strategies; the
    first declared is the default, the only one with variants="default" where the workload's
    others are OPTIONAL_VARIANTS; then those the
    workload has on this placement's kind of device only, workloads.<name>.device_strategies) x precision, at
    one placement (default: one `device`); on several devices only the tasks that have a
    data-parallel form (workloads.parallel.PARALLEL_TASKS), with the data-parallel strategies
    (workloads.parallel.parallel_strategies)."""
    from workloads.parallel import PARALLEL_TASKS, parallel_strategies
    placement = placement or Placement(device)
    W = importlib.import_module(f"workloads.{workload}")
    tasks = W.tasks(W.preset(preset).config)
    if placement.devices > 1:
        tasks = [t for t in tasks if t in PARALLEL_TASKS]
    out = []
    for f in frameworks:
        for m in MODES:
            for t in tasks:
                strategies = (*W.strategies(f, m, t), *W.device_strategies(f, m, t, placement.kind))
                chosen = [*(strategies[:1] if variants == "default" and W.OPTIONAL_VARIANTS else strategies),
                          *(parallel_strategies(f, m, t) if placement.devices > 1 else ())]
                out += [Case(f, workload, t, m, s, p, placement) for s in chosen for p in precisions]
    return out
