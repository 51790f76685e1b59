"""A benchmark process's session: its options and what it keeps across cases (pytest-benchmark's
BenchmarkSession's part): the records of cases that ran no timing, the frameworks missing,
the GEMM rates measured before the first case and the count of cases started."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from frameworks.harness.options import Options


@dataclass
class Session:
    """Records of cases that ran no timing (unsupported / failed) and missing frameworks."""
    options: Options
    records: list[dict[str, Any]] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    # GEMM rates ({source: FLOP/s}) measured before the first case; machine_info adds a
    # measurement after the last.
    gemm_samples: list[dict[str, float]] = field(default_factory=list)
    # {(framework, device, peak kind): (FLOP/s or None, how measured)}: MFU's denominators,
    # measured once per process before the first case that needs one (frameworks.harness.gemm)
    peaks: dict[tuple[str, str, str], tuple[float | None, str]] = field(default_factory=dict)
    # {"framework/mode": seconds}: the compiler's start-up in each compiled mode, measured before the
    # first case of the mode (frameworks.harness.run.started)
    compiler_startup: dict[str, float] = field(default_factory=dict)
    cases_started: int = 0         # position of the next case in this process (records' `order`)
    # the process's part of a set (frameworks.harness.sidebyside.SideBySide) where fwbench run's
    # coordinator started it; None alone (pytest --benchmark-only)
    sides: Any = None

    # what describes the machine this process runs on (the plugin gives machine.node_info;
    # this module sits below machine): for fwbench run's event stream, read once by node()
    describe_node: Callable[[], dict[str, Any]] = dict

    def node(self) -> dict[str, Any]:
        """The machine this process runs on, for fwbench run's event stream
        (reports.util.pytest_events), read once."""
        if not hasattr(self, "_node"):
            self._node = self.describe_node()
        return self._node
