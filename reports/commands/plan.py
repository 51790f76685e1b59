"""What `fwbench run` runs and in which order: RunOptions (the harness options of
workloads/options.py plus the run's own fields, RUN_FIELDS), the units (framework x device
count), the seeded process order (`schedule`: cold process k of every framework in round k,
the rest in a seeded order), each process's case-order seed and environment padding, and the
compile caches' folders (`merge_cache`: a cold process's folder into the run's shared one)."""
from __future__ import annotations

import hashlib
import random
import shutil
from dataclasses import Field, field, make_dataclass
from pathlib import Path
from typing import Any

from reports.commands import launch
from workloads import options
from workloads.base import FwbenchError, merge_tree, split_presets
from workloads.case import FRAMEWORKS  # noqa: F401  (fwbench's frameworks, in report order; the CLI reads it here)
from workloads.parallel import device_counts


class _RunOptions:
    """What RunOptions adds to its fields: the check of the process counts, and repeats."""
    cold: int
    warm: int
    device: str
    preset: str | None

    def __post_init__(self) -> None:
        # not given: the device's default (a precision not given is left to each process, which
        # takes the same default: workloads.options.device_defaults)
        self.preset = self.preset or options.device_defaults(self.device)["preset"]
        if self.cold < 1 or self.warm < 0:
            raise FwbenchError(f"a run needs at least one cold process and no negative number of warm ones "
                               f"(got cold {self.cold}, warm {self.warm})")

    @property
    def repeats(self) -> int:
        """Processes per framework: cold + warm (run side by side with a control, twice that at
        most: the control framework's second process per set; result files are then indexed)."""
        n = self.cold + self.warm
        return 2 * n if getattr(self, "cycles", 0) > 0 and getattr(self, "control", None) != "none" else n


# The run's own fields, beside the harness options: (name, type, default).
RUN_FIELDS: tuple[tuple[str, Any, Any], ...] = (
    ("timeout_s", float, 3600.0),
    ("extra", list[str], field(default_factory=list)),   # further pytest arguments
    ("cold", int, 1),                  # cold processes per framework (each from an empty cache folder)
    ("warm", int, 0),                  # warm processes per framework (the run's filled cache)
    ("seed", int, 0),                  # draws the process order, each process's case order and padding
    ("run_id", str | None, None),      # set by run(): names the run's cache folder, in every JSON
    ("cache_dir", Path | None, None),  # the run's compile caches (default: ~/.cache/fwbench/runs/<run id>)
    ("keep_cache", bool, False),       # leave the run's cache folder in place afterwards
    ("launcher", str, "local"),        # where processes run (reports.commands.launch.LAUNCHERS)
    ("slurm", launch.SlurmOptions | None, None),   # what each Slurm job asks for (--launcher slurm)
    ("suite", Path | None, None),      # the benchmark cases (default: the checkout's tests/benchmarks)
    # side by side (reports.commands.sets): cycles of blocks per task in each set; 0 runs each process
    # alone, one after another (the lone design: no pairing)
    ("cycles", int, 0),
    ("block_s", float, 0.25),          # seconds a block of calls lasts (sized from each case's own rounds)
    ("control", str | None, None),     # the framework whose process a set runs twice (the A/A control)
    ("processes_per_case", str | None, None),   # "1,2": a job step of N processes per case set (running.distributed)
)


# `fwbench run`'s options: the frameworks, every harness option a user may set (those of
# workloads.options.HARNESS not set per process, --workload's comma list as `workloads`), each
# with its declared default (a default is not passed on: the process takes the same), then the
# run's own fields. Repeat, role, run id and case order reach each process by pytest_command.
RunOptions = make_dataclass("RunOptions", [
    ("frameworks", tuple[str, ...]),
    *options.fields(lambda o: not o.process and o.name != "framework", rename={"workload": "workloads"}),
    *((n, t, d if isinstance(d, Field) else field(default=d)) for n, t, d in RUN_FIELDS),
], bases=(_RunOptions,))


RunOptions.__module__ = __name__      # where pickle finds it (Python 3.12's module=)


SHARED_CACHE = "shared"     # the run's cache folder every warm process uses


def schedule(frameworks: tuple[str, ...], cold: int, warm: int, seed: int) -> list[tuple[str, int, str, str]]:
    """(framework, process index, role, cache folder) in the order the processes run, in
    rounds of one process per framework, the frameworks in an order drawn per round with
    `seed`. Round 0 is every framework's first cold process (folder cold-0); the other cold
    rounds (cold-1, ...) and the warm rounds (folder `shared`) follow in a seeded random order.
    A process's index is its round: its position among its framework's processes."""
    rng = random.Random(seed)
    later = ["cold"] * (cold - 1) + ["warm"] * warm
    rng.shuffle(later)
    order, colds = [], 0
    for r, role in enumerate(["cold", *later]):
        folder = f"cold-{colds}" if role == "cold" else SHARED_CACHE
        colds += role == "cold"
        fws = list(frameworks)
        rng.shuffle(fws)
        order += [(f, r, role, folder) for f in fws]
    return order


def _seeded(seed: int, fw: str, repeat: int, what: str = "") -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}|{fw}|{repeat}{what}".encode()).digest()[:4], "little")


def case_order_seed(seed: int, fw: str, repeat: int) -> int:
    """The seed of one process's case order: fixed by the run's seed, different per process."""
    return _seeded(seed, fw, repeat)


ENV_PAD_MAX = 4096


def env_pad(seed: int, fw: str, repeat: int) -> str:
    """FWBENCH_ENV_PAD of one process: a string of a random length in 0..ENV_PAD_MAX-1, drawn
    from the run's seed, the framework and the process index. The environment sits at the top
    of the process's stack, so its size moves everything below it; measured times can change
    by several percent with it (Mytkowicz et al., "Producing wrong data without doing anything
    obviously wrong!", ASPLOS 2009). Paths in the environment embed the framework's name, so
    without padding each framework's processes would sit at sizes of their own."""
    return "x" * (_seeded(seed, fw, repeat, "|env") % ENV_PAD_MAX)


def merge_cache(src: Path, dst: Path) -> None:
    """Add a cold process's cache folder to the run's shared one (workloads.base.merge_tree:
    content-addressed entries, hard-linked). Never fails the run: a cache that could not be
    merged only makes a later warm process compile more."""
    try:
        merge_tree(src, dst)
    except (OSError, shutil.Error):
        pass


def unit_name(fw: str, devices: int) -> str:
    """A process's framework and placement as one name: `torch`, or `torch-x2` on 2 devices."""
    return fw if devices == 1 else f"{fw}-x{devices}"


def split_unit(unit: str) -> tuple[str, int]:
    """unit_name's inverse: 'torch-x2' -> ('torch', 2), 'jax' -> ('jax', 1)."""
    fw, sep, n = unit.rpartition("-x")
    return (fw, int(n)) if sep and fw and n.isdigit() else (unit, 1)


def units(frameworks: tuple[str, ...], devices: str) -> tuple[str, ...]:
    """Every (framework, device count) of a run as unit names; a placement is fixed per
    process, so each is a process of its own (and its own replicates)."""
    return tuple(unit_name(f, n) for n in device_counts(devices) for f in frameworks)


def process_names(fw: str, repeat: int | None, repeats: int) -> tuple[str, str]:
    """(result file name, progress label) of one process: `<fw>.json` / `fw` when the run
    has one process per framework, `<fw>-<repeat>.json` / `fw#repeat` when it has several."""
    if repeat is None or repeats <= 1:
        return f"{fw}.json", fw
    return f"{fw}-{repeat}.json", f"{fw}#{repeat}"


def preset_for(workload: str, text: str) -> str:
    """The preset a workload ran at, from --preset as given (workloads.base.split_presets)."""
    default, per = split_presets(text)
    return per.get(workload, default)


def log_file(out: Path, name: str) -> Path:
    """Where a process's output goes: logs/<fw>[-<repeat>].log beside its result file `name`."""
    return out / "logs" / f"{Path(name).stem}.log"
