"""The host's state while a case is timed: how busy the other processes and the hypervisor
kept the machine over the timed rounds (/proc/stat, load average; records' load_avg,
other_cpu, steal_frac, busy), and the size of the process's environment."""
from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Iterator

# A case is flagged `busy` when, over its timed rounds, other processes used more than
# BUSY_OTHER_CPU CPUs on average or the hypervisor stole more than BUSY_STEAL of the CPU
# time: either takes time from the timed process or from the memory bandwidth and caches it
# shares, so its times are not those of a quiet machine (pyperf warns likewise when the
# system is busy). Measured on the idle 2-core development machine (nothing else running;
# 30 windows of a one-second busy loop in this process): other_cpu 0.00 to 0.022, median
# 0.00 (a `ps` sampling every 5 s included), steal 0. Half a CPU is far above that noise and
# half of one other busy thread.
BUSY_OTHER_CPU = 0.5
BUSY_STEAL = 0.02


def cpu_jiffies(line: str) -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of every CPU together from /proc/stat's first line
    ("cpu  user nice system idle iowait irq softirq steal guest guest_nice"): busy is
    user + nice + system + irq + softirq, total the first eight (guest time is already in
    user)."""
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in line.split()[1:9])
    return user + nice + system + irq + softirq, steal, user + nice + system + idle + iowait + irq + softirq + steal


def _proc_stat_line() -> str | None:
    try:
        with open("/proc/stat") as f:
            return f.readline()
    except OSError:
        return None


def host_state(before: str | None, after: str | None, own_cpu_s: float, wall_s: float, clk_tck: float,
               load_avg: float | None, cpus: int) -> dict[str, Any]:
    """The host over a window, from /proc/stat's first line at its start and end: other_cpu,
    the CPUs other processes used on average (all CPUs' busy time minus this process's own
    CPU time, over the wall time; at least 0), steal_frac (steal over all CPU time) and busy
    (either above its threshold); load_avg as given. None where /proc/stat was not read, or
    where the window is too short for its ticks (1/clk_tck s per CPU, counted at both ends:
    2 * cpus / clk_tck / wall_s CPUs of error) to tell half of BUSY_OTHER_CPU (seen: one 2 ms
    timed round of torch's tiny train step read 1.39 other CPUs); 0.16 s on 2 CPUs."""
    out: dict[str, Any] = {"load_avg": load_avg, "other_cpu": None, "steal_frac": None, "busy": None}
    if before is None or after is None or wall_s <= 0 or 2 * cpus / clk_tck / wall_s > BUSY_OTHER_CPU / 2:
        return out
    (b0, s0, t0), (b1, s1, t1) = cpu_jiffies(before), cpu_jiffies(after)
    out["other_cpu"] = max(0.0, ((b1 - b0) / clk_tck - own_cpu_s) / wall_s)
    out["steal_frac"] = (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0
    out["busy"] = out["other_cpu"] > BUSY_OTHER_CPU or out["steal_frac"] > BUSY_STEAL
    return out


@contextlib.contextmanager
def host_window(read: Callable[[], str | None] = _proc_stat_line,
                own_cpu: Callable[[], float] = time.process_time) -> Iterator[dict[str, Any]]:
    """A block over which the host's state is measured (host_state): yields a dict filled when
    the block ends. `read` returns /proc/stat's first line (None where it cannot); `own_cpu`
    the case's own CPU seconds so far (this process's; a serving case adds its serving
    process's, frameworks.harness.serving)."""
    state: dict[str, Any] = {}
    before, cpu0, t0 = read(), own_cpu(), time.perf_counter()
    yield state
    after, cpu1, t1 = read(), own_cpu(), time.perf_counter()
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:
        load = None
    state.update(host_state(before, after, cpu1 - cpu0, t1 - t0, os.sysconf("SC_CLK_TCK"), load,
                            os.cpu_count() or 1))


def wait_quiet(max_wait_s: float, first_s: float = 0.5, read: Callable[[], str | None] = _proc_stat_line,
               sleep: Callable[[float], None] = time.sleep) -> tuple[float, bool]:
    """Wait for the machine to be quiet before a busy case is measured again: sleep in windows
    that double from `first_s` (0.5, 1, 2, 4 ... s; a window of this sleeping process measures
    the other processes' CPU use alone), until one window is not busy (host_state) or
    `max_wait_s` have passed. Returns (seconds waited, whether the last window was quiet)."""
    waited, window, t0 = 0.0, first_s, time.perf_counter()
    while waited < max_wait_s:
        with host_window(read) as state:
            sleep(min(window, max_wait_s - waited))
        waited = time.perf_counter() - t0
        if state["busy"] is False:
            return waited, True
        window *= 2
    return waited, False


def env_bytes() -> int:
    """Bytes the process's environment takes ("NAME=value\\0" per variable): its size moves
    the stack, and with it the alignment of everything on it, which changed measured times by
    several percent in Mytkowicz et al. (2009); `fwbench run` pads it by a random length per
    process (FWBENCH_ENV_PAD), so that no framework's processes sit at one layout."""
    return sum(len(k) + len(v) + 2 for k, v in os.environb.items())

