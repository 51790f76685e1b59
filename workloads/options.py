"""The harness's options, declared once: the pytest plugin adds them
(frameworks.pytest_plugin), checks and reads them into frameworks.harness.options.Options; `fwbench
run` (reports.commands.cli) takes the user-facing ones into reports.commands.plan.RunOptions and
passes them to each framework's pytest process (argv). Both dataclasses are made from HARNESS
(`fields`), so a new option is one Option here and the code that reads it. Framework-free.

    Option("budget_s", float, 3.0, "timed seconds per case", low=0, strict=True, what="...")
        -> --budget-s on pytest and, with cli=True, on `fwbench run`
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from workloads.base import DEVICE_KINDS, FwbenchError, choose
from workloads.parallel import device_counts


@dataclass(frozen=True)
class Option:
    name: str                          # attribute name; the flag is --name-with-dashes
    type: Callable[[str], Any] | None  # int, float, str; None for a flag (store_true)
    default: Any
    help: str
    low: float | None = None           # lowest accepted (numbers)
    strict: bool = False               # the value must be above `low`, not at it
    choices: tuple[str, ...] | None = None
    what: str = ""                     # what a number must be, for the error ("an integer of at least 1")
    cli: bool = False                  # `fwbench run` takes it from the user and passes it on
    process: bool = False              # set per process by `fwbench run` (never by a user)
    validate: Callable[[Any], Any] | None = None   # raises FwbenchError on a bad value

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value: Any) -> Any:
        """The value, or FwbenchError saying what is wrong and what is valid."""
        if value is None or self.type is None:
            return value
        if self.validate is not None:
            self.validate(value)
        if self.choices is not None:
            return choose(self.name.replace("_", " "), value, self.choices)
        if self.low is not None:
            bad = not math.isfinite(value) or value < self.low or (self.strict and value <= self.low)
            if bad:
                raise FwbenchError(f"{self.flag} must be {self.what}, got {value!r}")
        return value

    def parse(self, text: str) -> Any:
        """A command line's text -> the checked value (FwbenchError, one line, if it is not one)."""
        try:
            value = self.type(text) if self.type is not None else text
        except ValueError:
            raise FwbenchError(f"{self.flag} must be {self.what or 'a ' + self.type.__name__}, got {text!r}") from None
        return self.check(value)

    def pytest_kwargs(self) -> dict[str, Any]:
        if self.type is None:
            return {"action": "store_true", "help": self.help}
        return {"type": self.type, "default": self.default, "help": self.help}


HARNESS: tuple[Option, ...] = (
    Option("framework", str, None, "comma list of frameworks (default: all)"),
    Option("workload", str, None, "comma list of workloads (default: all)", cli=True),
    Option("preset", str, None, "preset for every workload, or per workload: gpt=gpt2,diffusion=ddpm-cifar "
           "(default by --device: small on the CPU, gpt=gpt2,diffusion=ddpm-cifar on a GPU)", cli=True),
    Option("device", str, "cpu", "cpu (default), cuda or gpu", choices=DEVICE_KINDS, cli=True),
    Option("threads", int, None, "intra-op threads for every framework (default: all CPUs)", low=1,
           what="a positive integer", cli=True),
    Option("matmul_precision", str, "highest", "highest (default: full fp32, TF32 off) or tf32",
           choices=("highest", "tf32")),
    Option("budget_s", float, 3.0, "timed seconds per case, to size its rounds (default 3)", low=0, strict=True,
           what="a positive finite number of seconds", cli=True),
    Option("rounds", int, None, "fixed timed rounds per case (overrides --budget-s)", low=1,
           what="an integer of at least 1", cli=True),
    Option("min_rounds", int, 7, "fewest timed rounds per case when sized by the budget (default 7)", low=1,
           what="an integer of at least 1"),
    Option("warmup_rounds", int, 2, "untimed rounds before the timed ones (default 2)", low=0,
           what="an integer of at least 0"),
    Option("precision", str, None, "comma list of numeric policies to run: fp32, bf16 (workloads/precision.py "
           "defines them; default by --device: fp32 on the CPU, fp32,bf16 on a GPU)", cli=True),
    Option("devices", str, "1", "comma list of device counts for data-parallel train steps (default 1): "
           "`fwbench run` starts one process per count, a pytest process takes one count", cli=True,
           validate=device_counts),
    Option("simulated_devices", None, False, "split the CPU into --devices simulated devices (JAX host-platform "
           "devices, TensorFlow logical devices, torch one process per device)", cli=True),
    Option("busy_retries", int, 2, "times a case timed while the machine was busy is measured again, after "
           "waiting for the machine to be quiet (default 2; 0: never)", low=0, what="an integer of at least 0",
           cli=True),
    Option("busy_wait_s", float, 30.0, "longest wait for a quiet machine before each such re-measurement, in "
           "windows that double from 0.5 s (default 30)", low=0, what="a finite number of seconds, at least 0",
           cli=True),
    Option("bare_loop", None, False, "also time a bare loop over the same callable (overhead check)"),
    Option("memory", str, "on", "peak memory on the CPU: on (default: one more call per case; TensorFlow in a "
           "memory-only process of its own) or off (neither: fwbench run --quick)", choices=("on", "off"), cli=True),
    Option("variants", str, "all", "all (default): every strategy a workload declares; default: only each "
           "case's default strategy where the others are optional variants (gpt's and diffusion's: torch's "
           "train-step recipes, CUDA graphs; the other workloads' strategies are what they compare and "
           "always run)", choices=("all", "default"), cli=True),
    Option("case_order_seed", int, None, "run the benchmark cases in a random order drawn with this seed",
           process=True),
    Option("task_order_seed", int, None, "run the cases task by task, the tasks in an order drawn with this seed "
           "(the same for every process of a set: set by fwbench run)", process=True),
    Option("repeat", int, None, "this process's index within the run (set by fwbench run)", process=True),
    Option("repeats", int, None, "processes per framework in the run (set by fwbench run)", process=True),
    Option("cold", int, None, "cold processes per framework in the run (set by fwbench run)", process=True),
    Option("warm", int, None, "warm processes per framework in the run (set by fwbench run)", process=True),
    Option("cache_role", str, None, "cold or warm: this process's compile-cache role (default: from the cache "
           "folder at start, empty -> cold, filled -> warm)", choices=("cold", "warm"), process=True),
    Option("run_id", str, None, "identifier of the run (set by fwbench run)", process=True),
)


# Processes per framework (the unit of replication) and timed rounds per case in a full
# `fwbench run` (docs/design/statistics.md, "Allocation"; `python -m
# reports.conclusions.variance --allocation docs/measurements/allocation-basis-xeon` prints the
# options): simulated with the variance components of the run they were chosen on (then the
# committed example, a 2-core Intel Xeon), 7 warm processes call a
# true 20% difference between frameworks "faster" in 83% of tasks (5: 66%), with any false
# faster/slower in 4% of reports of equal speeds and 95% intervals covering 95%; rounds buy
# almost nothing (the within-process noise is small against the between-process one), so 4
# instead of 6 pay for the 2 extra warm processes: about 43 minutes on the example's 2-core
# machine. 2 cold ones, so a cold first call has two processes per case and the spread pooled
# over a framework's cases has degrees of freedom.
RUN_COLD, RUN_WARM = 2, 7
RUN_ROUNDS = 4
# Side by side (reports.commands.sets, fwbench run's default): cold and warm sets, cycles of blocks
# per task in each set, and a block's length (docs/design/statistics.md, "Allocation, side by
# side"). Six sets: with fewer, the t quantile at the Holm levels (df = sets - 1) swamps any gain
# from more cycles; two of them cold, so a cold first call has a spread pooled over a mode's cases
# (job costs with intervals). About 107 minutes on the 2-core AMD EPYC (measured: a cold set 21
# min, a warm one 14-15). The lone processes' counts above are --cycles 0's defaults.
SETS_COLD, SETS_WARM = 2, 4
RUN_CYCLES, RUN_BLOCK_S = 10, 0.25

GPU_DEVICES = ("cuda", "gpu")


def device_defaults(device: str | None, quick: bool = False) -> dict[str, Any]:
    """What a run defaults to on `device` when the user does not say (explicit options win):
    the preset, the precisions, and the plan. On the CPU: `small` (tiny with --quick), fp32,
    a full run's fixed rounds (`rounds_by_budget` False). On a GPU (cuda, gpu): the GPU presets
    (GPT-2 124M at batch 12, the DDPM paper's CIFAR-10 UNet at its batch 128), fp32 (TF32 off:
    --matmul-precision highest) and bf16 both, rounds sized by the time budget (a GPU step of
    these presets is milliseconds to a second, so a fixed round count would be too few or too
    long); --quick on a GPU keeps the GPU presets and runs fewer processes (reports/commands/cli.py),
    never the tiny ones, which only measure launch overhead there."""
    if device in GPU_DEVICES:
        return {"preset": "gpt=gpt2,diffusion=ddpm-cifar", "precision": "fp32,bf16", "rounds_by_budget": True}
    return {"preset": "tiny" if quick else "small", "precision": "fp32", "rounds_by_budget": quick}


def fields(select: Callable[[Option], bool] = lambda o: True,
           rename: Mapping[str, str] | None = None) -> list[tuple[str, Any, Any]]:
    """dataclasses.make_dataclass's field specs for the options `select` keeps, in HARNESS
    order: each option's name (or `rename`'s), its type (bool for a flag; Optional where the
    default is None) and its declared default. The harness's Options and `fwbench run`'s
    RunOptions are made from these, so neither declares an option again."""
    out = []
    for o in HARNESS:
        if select(o):
            kind = bool if o.type is None else o.type
            out.append(((rename or {}).get(o.name, o.name), kind | None if o.default is None else kind,
                        dataclasses.field(default=o.default)))
    return out


def checked(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every harness option's value, each checked (FwbenchError on the first bad one)."""
    out = {o.name: o.check(values.get(o.name, o.default)) for o in HARNESS}
    by_device = device_defaults(out["device"])
    for name in ("preset", "precision"):        # not given: the device's default
        if out[name] is None:
            out[name] = by_device[name]
    for name in ("framework", "workload"):
        v = out[name]
        if v is not None and not v.replace(",", "").strip():
            raise FwbenchError(f"--{name} names no {name}: give one or more names, or leave the option out for all")
    return out


def argv(values: Mapping[str, Any], names: Iterable[str] | None = None) -> list[str]:
    """The pytest command-line arguments for `values`, in HARNESS order (None, a false flag
    and an option's own default are left out: the process takes the same default)."""
    out: list[str] = []
    by_device = device_defaults(values.get("device") or "cpu")     # the process takes the same
    for o in HARNESS:
        if (names is not None and o.name not in names) or o.name not in values:
            continue
        v = values[o.name]
        if v is None or v is False or v == o.default or v == by_device.get(o.name):
            continue
        out += [o.flag] if o.type is None else [o.flag, str(v)]
    return out
