"""What a benchmark process was asked to do: Options, made from the harness options' one
declaration (workloads/options.py: HARNESS), the presets per workload, and the user's device
name in a framework's own words."""
from __future__ import annotations

import dataclasses

import frameworks
import workloads
from frameworks.base import Unsupported
from workloads import options
from workloads.base import DEVICE_KINDS, FwbenchError, choose, is_accelerator, split_presets
from workloads.case import Placement


def parse_presets(text: str, selected: tuple[str, ...]) -> dict[str, str]:
    """`--preset small` (every workload) or `--preset gpt=gpt2,diffusion=ddpm-cifar` (per
    workload; a bare name is the default for the others) -> {workload: preset}, each checked."""
    default, per = split_presets(text)
    for wl in per:
        choose("workload", wl, workloads.WORKLOADS)
    out = {}
    for wl in selected:
        name = per.get(wl, default)
        try:
            workloads.get(wl).preset(name)
        except FwbenchError as e:
            raise FwbenchError(f"{e} (per-workload presets: --preset gpt=gpt2,diffusion=ddpm-cifar)") from None
        out[wl] = name
    return out


class _Options:
    """What Options adds to its fields: the presets per workload, and the placement."""
    frameworks: tuple[str, ...]
    workloads: tuple[str, ...]
    preset: str
    precision: str
    presets: dict[str, str]
    device: str
    devices: str
    simulated_devices: bool

    def __post_init__(self) -> None:
        by_device = options.device_defaults(self.device)
        if self.preset is None:           # not given: the device's default (workloads/options.py)
            self.preset = by_device["preset"]
        if self.precision is None:
            self.precision = by_device["precision"]
        if not self.presets:
            self.presets = parse_presets(self.preset, self.workloads)

    @property
    def n_devices(self) -> int:
        return int(str(self.devices).split(",")[0])

    @property
    def placement(self) -> Placement:
        return Placement(self.device, self.n_devices, self.simulated_devices and self.n_devices > 1)


# A process's options: the selected frameworks and workloads (the --framework and --workload
# lists, split and checked by the plugin), every other harness option as its own field with
# its declared default (workloads.options.HARNESS: preset as given, budget_s, rounds, ...;
# replication fields such as run_id, repeat and cold are set by `fwbench run` and None in a
# direct run), and what no command line sets: max_rounds, the seed of the inputs and
# parameters, and presets ({workload: preset}, what runs; from preset when not given).
Options = dataclasses.make_dataclass("Options", [
    ("frameworks", tuple[str, ...]),
    ("workloads", tuple[str, ...]),
    *options.fields(lambda o: o.name not in ("framework", "workload")),
    ("max_rounds", int, dataclasses.field(default=100)),
    ("seed", int, dataclasses.field(default=0)),
    ("presets", dict[str, str], dataclasses.field(default_factory=dict)),
], bases=(_Options,))
Options.__module__ = __name__      # where pickle finds it (Python 3.12's module=)


def resolve_device(adapter: frameworks.Adapter, device: str) -> str:
    """Map the user's device name onto the framework's ('cuda' and 'gpu' are one accelerator)."""
    choose("device", device, DEVICE_KINDS)
    devs = adapter.devices()
    own = adapter.own_device(device)
    if own in devs:
        return own
    if is_accelerator(device):
        raise Unsupported(f"{adapter.name} sees no GPU here (devices: {', '.join(devs)})")
    raise Unsupported(f"{adapter.name} has no device {device!r} (devices: {', '.join(devs)})")
