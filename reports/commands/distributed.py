"""`fwbench run --processes-per-case N[,M...]`: data parallel across processes,
one process per device, each framework in its own distributed idiom.

Per framework, workload, process count and repeat (the run's cold and warm processes, in the
runner's seeded rounds: plan.schedule), one job step of N processes runs
`python -m frameworks.distributed` (frameworks/harness/distributed.py): on Slurm
(--launcher slurm, or submitit where srun is on the PATH) `srun --ntasks=N
--kill-on-bad-exit=1`, the ranks finding each other from Slurm's environment; locally
(--launcher local or submitit-local) the same program in N processes started here, with
fwbench's FWBENCH_DIST_* variables in place of Slurm's. Rank 0 writes the document
<out>/distributed/<fw>-p<N>-<repeat>.json after every case.

A rank that fails (killed, an error, a peer it cannot reach) ends the step: srun's
--kill-on-bad-exit, or this launcher, ends the other ranks, and one line names the rank and
the cause (the rank's own error line where it wrote one, srun's or the exit status
otherwise); the document keeps every finished case and records the one under way, and those
never reached, as failed with that line. --timeout-s limits a step the same way.

Imports no framework: the reports read the documents (reports/measures/distributed.py).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from reports.commands import launch, plan
from reports.commands.ranks import launch_local, launch_srun, rank_command
from reports.util import atomic
from workloads import distributed as wd
from workloads.base import FwbenchError, available_cpus, split_names
from workloads.parallel import device_counts


def counts(text: str) -> tuple[int, ...]:
    """--processes-per-case "1,2" -> (1, 2); one line saying what is valid otherwise."""
    try:
        return device_counts(text)
    except FwbenchError:
        raise FwbenchError(f"--processes-per-case takes a comma list of process counts of at least 1 (e.g. 1,2), "
                           f"got {text!r}") from None


def launcher_kind(launcher: str) -> str:
    """'srun' or 'local' for fwbench run's --launcher."""
    if launcher == "slurm" or (launcher == "submitit" and shutil.which("srun")):
        if not shutil.which("srun"):
            raise FwbenchError("--launcher slurm needs Slurm's srun on the PATH (a login node of the cluster); "
                               "--launcher local runs the processes on this machine")
        return "srun"
    return "local"


def finalize(doc_path: Path, base: dict[str, Any], planned: list[str | None], why: str | None) -> dict[str, Any]:
    """The step's document as kept: rank 0's (every finished case), or `base` where rank 0
    wrote none; when the step ended badly (`why`) before rank 0 completed it, the case under
    way `failed` with `why` and those never reached `failed` as not reached."""
    try:
        doc = json.loads(doc_path.read_text())
    except (OSError, ValueError):
        doc = {**base, "cases": [], "running": None, "complete": False}
    if doc.get("complete"):              # every case finished: a rank that failed after is noted, no case changed
        if why is not None:
            doc["ended_by"] = f"after the document was complete: {why}"
        return doc
    why = why or "the step ended without completing its document"
    done = {c.get("strategy") for c in doc.get("cases", [])}
    first = True
    for s in planned:
        if s in done:
            continue
        doc["cases"].append({"strategy": s, "status": "failed",
                             "reason": f"{why} during this case" if first else f"not reached: {why}"})
        first = False
    doc.update(complete=False, running=None, ended_by=why)
    return doc


def step(framework: str, workload: str, n: int, doc_path: Path, args: list[str], planned: list[str | None],
         base: dict[str, Any], kind: str, timeout_s: float, threads: int, label: str, log: Path,
         env: dict[str, str] | None = None, slurm: launch.SlurmOptions | None = None) -> tuple[Path, str | None]:
    """One job step of N ranks writing `doc_path`; (the document as kept, the line that
    ended the step badly or None)."""
    parts = wd.parts_dir(doc_path)
    shutil.rmtree(parts, ignore_errors=True)
    doc_path.unlink(missing_ok=True)
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = rank_command(framework, workload, doc_path, args)
    if kind == "srun":
        why = launch_srun(cmd, n, env or {}, timeout_s, parts, log, threads, label, slurm)
    else:
        why = launch_local(cmd, n, env or {}, timeout_s, parts, log)
    doc = finalize(doc_path, base, planned, why)
    atomic.write_json(doc_path, doc)
    shutil.rmtree(parts, ignore_errors=True)
    return doc_path, why


def strategies(framework: str, variants: str | None) -> list[str | None]:
    """The cases of a framework's job step: data parallel, and (unless --variants default,
    --quick) the sharded form (torch FSDP2, JAX sharded parameters; TensorFlow's is recorded
    unsupported: DTensor is not built)."""
    from workloads.parallel import SHARDED
    return [None] if variants == "default" else [None, SHARDED]


def run(opts: Any, out: Path, progress: Any) -> list[Path]:
    """`fwbench run --processes-per-case N[,M]`: per framework, workload, process count and
    repeat (the runner's schedule of cold and warm rounds), one job step; the documents in
    <out>/distributed/. The run's compile caches as runner.run keeps them: a folder per
    cold process, merged into the one the warm processes share, removed at the end unless
    --keep-cache."""
    from reports.commands import runner
    out = atomic.absolute(out)
    opts.run_id = opts.run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
    own = opts.cache_dir is None
    if own:
        root = Path(os.environ.get("FWBENCH_CACHE_DIR") or Path.home() / ".cache" / "fwbench")
        opts.cache_dir = root / "runs" / opts.run_id
    try:
        return _steps(opts, out, progress, runner)
    finally:
        if own and not opts.keep_cache:
            shutil.rmtree(opts.cache_dir, ignore_errors=True)


def _steps(opts: Any, out: Path, progress: Any, runner: Any) -> list[Path]:
    ns = counts(opts.processes_per_case)
    kind = launcher_kind(opts.launcher)
    threads = int(opts.threads or max(1, available_cpus() // max(ns)))
    workloads = split_names(opts.workloads or "gpt", "workload", ("gpt", "diffusion"))
    folder = out / wd.FOLDER
    units = tuple(f"{fw}-p{n}" for n in ns for fw in opts.frameworks)
    order = plan.schedule(units, opts.cold, opts.warm, opts.seed)
    progress.line(f"data parallel across processes: {', '.join(map(str, ns))} process(es) per case, {threads} "
                  f"thread(s) each, launched by {'srun (Slurm)' if kind == 'srun' else 'this machine'}; documents in "
                  f"{folder}")
    written = []
    for i, (unit, repeat, role, cache) in enumerate(order):
        fw, _, p = unit.rpartition("-p")
        n = int(p)
        for w in workloads:
            planned = strategies(fw, opts.variants)
            name = wd.document_name(fw if len(workloads) == 1 else f"{fw}-{w}", n, repeat)
            doc_path = folder / name
            label = f"{fw}-p{n}#{repeat}" + ("" if len(workloads) == 1 else f" {w}")
            rounds = opts.rounds or 10
            args = ["--preset", plan.preset_for(w, opts.preset), "--device", opts.device, "--threads", str(threads),
                    "--rounds", str(rounds), "--warmup", str(opts.warmup_rounds if opts.warmup_rounds is not None
                                                             else 2),
                    "--strategies", ",".join("default" if s is None else s for s in planned), "--seed",
                    str(opts.seed), "--run", json.dumps({"run_id": opts.run_id, "repeat": repeat, "role": role})]
            base = {"kind": wd.KIND, "schema": wd.SCHEMA, "framework": fw, "workload": w, "processes": n,
                    "preset": plan.preset_for(w, opts.preset), "device": opts.device, "threads_per_process": threads,
                    "launcher": "srun" if kind == "srun" else "local", "planned": planned, "run_id": opts.run_id,
                    "repeat": repeat, "role": role}
            (opts.cache_dir / cache).mkdir(parents=True, exist_ok=True)
            env = {"FWBENCH_CACHE_DIR": str(opts.cache_dir / cache)}
            progress.line(f"{label}: starting {n} process(es) ({role}), step {i + 1} of {len(order)} "
                          f"({progress.elapsed()} elapsed)")
            path, why = step(fw, w, n, doc_path, args, planned, base, kind, opts.timeout_s, threads, label,
                             plan.log_file(out, name), env, opts.slurm)
            doc = json.loads(path.read_text())
            kept = sum(c.get("status") in ("ok", "checked", "unsupported") for c in doc["cases"])
            if why and not doc.get("complete"):
                progress.line(f"{label}: {why}; kept {kept} finished case(s) of {len(planned)} ({path})")
            else:
                said = "; ".join(_said(c) for c in doc["cases"])
                progress.line(f"{label}: done, {said}" + (f"; then {why}" if why else ""))
            written.append(path)
        if role == "cold":
            plan.merge_cache(opts.cache_dir / cache, opts.cache_dir / plan.SHARED_CACHE)
    return written


def _said(case: dict[str, Any]) -> str:
    what = case.get("strategy") or "data parallel"
    if case.get("status") != "ok":
        return f"{what} {case.get('status')}" + (f" ({str(case.get('reason'))[:200]})" if case.get("reason") else "")
    step = case.get("step_s")
    return f"{what} step {step * 1e3:.2f} ms" if step else f"{what} ok"


def summary(out: Path) -> str:
    """The run's processes x frameworks table, alpha-beta fit and the model at 64/1,024/4,096
    GPUs as Markdown (what fwbench run prints after a --processes-per-case run, and writes to
    <out>/distributed/summary.md)."""
    from reports.measures import distributed as ad
    docs, probs = ad.read([out])
    parts = ["# Data parallel across processes", ""]
    for title, t in (("Processes x frameworks (measured)", ad.table(docs)),
                     ("Alpha-beta fit of the measured all-reduces (functional: loopback)", ad.fit_table(docs)),
                     ("The model at 64, 1,024 and 4,096 GPUs (predicted, not measured)", ad.predictions(docs))):
        parts += [f"## {title}", "", _markdown(t) if len(t) else "(none)", ""]
    parts += ["Model assumptions:", ""] + [f"- {a}" for a in ad.assumptions()] + [""]
    parts += [f"- problem: {p}" for p in probs]
    return "\n".join(parts)


def _markdown(t: Any) -> str:
    cols = [str(c) for c in t.columns]
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")   # noqa: E731
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(cell(v) for v in row) + " |" for row in t.itertuples(index=False)])


def finish(out: Path, progress: Any, seconds: float) -> int:
    """After a --processes-per-case run: the summary printed and written to
    <out>/distributed/summary.md; `fwbench report` on a folder that also holds one-process
    results puts the same tables in the scale-out section."""
    text = summary(atomic.absolute(out))
    path = atomic.absolute(out) / wd.FOLDER / "summary.md"
    with atomic.safe_write(path, "the summary"):
        path.write_text(text + "\n", encoding="utf-8")
    print(text)
    progress.line(f"data parallel across processes done in {seconds:.0f} s: {path}")
    return 0
