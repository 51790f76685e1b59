"""Data parallel across processes: the documents `fwbench run --processes-per-case`
writes (<run>/distributed/<fw>-p<N>-<repeat>.json, workloads.distributed; rank 0 of each job
step writes one), read into the scale-out section's processes x frameworks table, the
alpha-beta fit of their all-reduce sweeps, and the model's predictions at scale
(workloads.commmodel). What is measured and what is modelled stay apart: `claim5` returns
both for claim 5's row, never a verdict (a CPU over loopback says nothing about thousands of
GPUs, and the model is a model).

Per document and case: rank 0's median step over the timed rounds, the same step without
its synchronisation (the no-sync probe: the compute-only reference), the step's all-reduces
replayed alone (each framework's own collective, the same tensors), the step's collectives
by the framework's own account (DDP's hook, the compiled HLO, the traced graph) against the
analytic all-reduce of every gradient once, and the check of every rank against one device.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from reports.measures import stats
from workloads import commmodel
from workloads import distributed as wd
from workloads.case import FRAMEWORKS

PREDICTED_AT = (64, 1024, 4096)
# Where the alpha-beta fit was measured: said wherever it is shown.
LOOPBACK = ("fitted on this machine's processes over loopback (functional: CPU collectives through the kernel's "
            "TCP stack, with the ranks sharing its cores), not an accelerator interconnect")


def framework_order(names: Iterable[str]) -> list[str]:
    """The report's framework order (reports.measures.data reads this module: not imported here)."""
    names = set(names)
    return [f for f in FRAMEWORKS if f in names] + sorted(names - set(FRAMEWORKS))


def read(paths: Iterable[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """The distributed documents in each folder's distributed/ sub-folder (and any such
    document given as a file), with one problem line per file that is not one."""
    docs, probs = [], []
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir() and (p / wd.FOLDER).is_dir():
            files += sorted((p / wd.FOLDER).glob("*.json"))
    for f in files:
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            probs.append(f"{f}: not a readable distributed document ({type(e).__name__}); skipped")
            continue
        why = _invalid(doc)
        if why:
            probs.append(f"{f}: {why}; skipped")
            continue
        docs.append({**doc, "file": f.name})
    return docs, probs


def _invalid(doc: Any) -> str | None:
    if not isinstance(doc, dict) or doc.get("kind") != wd.KIND:
        return f"not a distributed document (kind is not {wd.KIND!r})"
    for k, t in (("framework", str), ("processes", int), ("cases", list)):
        if not isinstance(doc.get(k), t):
            return f"distributed document without a valid {k!r}"
    if any(not isinstance(c, dict) or not isinstance(c.get("status"), str) for c in doc["cases"]):
        return "distributed document with a case that has no status"
    return None


def documents(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The report's distributed documents (reports.measures.data.load puts them in attrs)."""
    return list(df.attrs.get("distributed") or [])


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def cases(docs: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per document and case."""
    rows = []
    for d in docs:
        for c in d["cases"]:
            chk = c.get("check") or {}
            rows.append({"framework": d["framework"], "workload": d.get("workload"), "mode": d.get("mode"),
                         "strategy": c.get("strategy"), "preset": d.get("preset"), "processes": d["processes"],
                         "threads": d.get("threads_per_process"), "launcher": d.get("launcher"),
                         "repeat": d.get("repeat"), "machine_id": d.get("machine_id"), "file": d.get("file"),
                         "status": c["status"], "reason": c.get("reason"),
                         "step_s": _num(c.get("step_s")), "nosync_s": _num(c.get("nosync_s")),
                         "comm_s": _num(c.get("comm_s")), "allreduce_bytes": _num(c.get("allreduce_bytes")),
                         "allreduce_count": _num(c.get("allreduce_count")),
                         "analytic_bytes": _num(c.get("analytic_allreduce_bytes")),
                         "wire_bytes": _num(c.get("wire_bytes")),
                         "analytic_wire_bytes": _num(c.get("analytic_wire_bytes")),
                         "collectives": c.get("collectives") or {},
                         "grad_rel": _num(chk.get("grad_rel")), "rel": _num(chk.get("rel")),
                         "grad_rtol": _num(chk.get("grad_rtol")), "rtol": _num(chk.get("rtol")),
                         "ranks_timed": sum(r.get("step_s") is not None for r in c.get("ranks") or [])})
    return pd.DataFrame(rows)


KEY = ("framework", "workload", "mode", "strategy", "preset", "threads", "machine_id")


def _med(xs: Iterable[float | None]) -> float | None:
    v = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(v) if v else None


def share(step: float | None, nosync: float | None) -> float | None:
    """The exposed communication share 1 - t(no-sync) / t(step)."""
    return None if not step or nosync is None else 1 - nosync / step


def overlap(step: float | None, nosync: float | None, comm: float | None) -> float | None:
    """The share of the collectives' own time the step hid: 1 - (t(step) - t(no-sync)) /
    t(collectives alone), within [0, 1] (0: everything exposed, or more: the ranks' waits
    and core sharing add to it)."""
    if step is None or nosync is None or not comm:
        return None
    return min(1.0, max(0.0, 1 - (step - nosync) / comm))


def _fmt(x: float | None, f: str = "{:.2f}") -> str:
    return "n/a" if x is None else f.format(x)


def _kib(b: float | None) -> str:
    return "n/a" if b is None else f"{b / 1024:,.1f} KiB"


def _ops(ops: Any) -> str:
    """{op: {count, bytes}} in words: 'all-reduce x1: 463.0 KiB'."""
    return ", ".join(f"{op} x{v.get('count')}: {_kib(_num(v.get('bytes')))}" for op, v in (ops or {}).items()
                     if isinstance(v, dict)) or "none"


def _case(strategy: Any) -> str:
    return strategy if isinstance(strategy, str) else "data parallel"


def table(docs: list[dict[str, Any]]) -> pd.DataFrame:
    """Processes x frameworks: per framework, case and process count, over its job steps
    (one per repeat): the step (median), the step without synchronisation, the exposed
    communication share, the collectives alone and the overlap, the all-reduce bytes
    against the analytic, the weak-scaling efficiency t(1 process) / t(N processes) (each
    repeat's N-process step over the 1-process step of the same repeat, median), and the
    check's worst error over every rank and repeat."""
    c = cases(docs)
    if c.empty:
        return c
    rows = []
    for key, g in c.groupby(list(KEY) + ["processes"], dropna=False, sort=False):
        ok = g[g["status"] == "ok"]
        step, nosync, comm = (_med(ok[k]) for k in ("step_s", "nosync_s", "comm_s"))
        base = c[(c["processes"] == 1) & (c["status"] == "ok")
                 & pd.concat([(c[k] == v) | (c[k].isna() & pd.isna(v)) for k, v in zip(KEY, key)], axis=1).all(axis=1)]
        by_repeat = {r: s for r, s in zip(base["repeat"], base["step_s"]) if s}
        eff = _med([by_repeat[r] / s for r, s in zip(ok["repeat"], ok["step_s"]) if r in by_repeat and s])
        if eff is None and len(base) and step:
            eff = _med(base["step_s"]) / step
        wire, awire = _med(ok["wire_bytes"]), _med(ok["analytic_wire_bytes"])
        failed = g[g["status"] != "ok"]
        rows.append({"framework": key[0], "case": f"{key[2]}, {_case(key[3])}", "processes": int(key[-1]),
                     "launcher": ", ".join(sorted({str(x) for x in g["launcher"].dropna()})) or "n/a",
                     "steps timed": f"{len(ok)} of {len(g)}",
                     "step": stats.fmt_seconds(step) if step else "n/a",
                     "no-sync step": stats.fmt_seconds(nosync) if nosync else "n/a",
                     "communication share": _fmt(share(step, nosync)),
                     "collectives alone": stats.fmt_seconds(comm) if comm else "n/a",
                     "overlap": _fmt(overlap(step, nosync, comm)),
                     "collectives per step": _ops(ok["collectives"].iloc[0]) if len(ok) else "n/a",
                     "on the wire, measured / analytic": (
                         f"{_kib(wire)} / {_kib(awire)} = {wire / awire:.3f}" if wire is not None and awire else
                         "none moved (1 process)" if int(key[-1]) == 1 else "n/a"),
                     "efficiency t(1) / t(N)": _fmt(eff) if int(key[-1]) > 1 else "1 (baseline)" if step else "n/a",
                     "check, worst over ranks (grad / params)": (
                         f"{g['grad_rel'].max():.1e} / {g['rel'].max():.1e}" if g["grad_rel"].notna().any() else "n/a"),
                     "status": "ok" if failed.empty else "; ".join(
                         f"{s}: {str(r)[:160]}" for s, r in zip(failed["status"], failed["reason"]))})
    out = pd.DataFrame(rows)
    order = framework_order(out["framework"])
    out["_k"] = [order.index(f) for f in out["framework"]]
    return out.sort_values(["_k", "case", "processes"], kind="stable").drop(columns="_k").reset_index(drop=True)


def fits(docs: list[dict[str, Any]]) -> dict[tuple[str, int], commmodel.Fit]:
    """Per framework and process count, the alpha-beta fit (workloads.commmodel.fit) of every
    document's all-reduce sweep pooled (each size's slowest-rank median)."""
    pts: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for d in docs:
        sw = d.get("sweep") or {}
        for p in sw.get("points") or []:
            if _num(p.get("bytes")) and _num(p.get("s")):
                pts.setdefault((d["framework"], d["processes"]), []).append((float(p["bytes"]), float(p["s"])))
    out = {}
    for (fw, n), p in pts.items():
        if n >= 2 and len({s for s, _ in p}) >= 2:
            out[(fw, n)] = commmodel.fit(p, n)
    return out


def fit_table(docs: list[dict[str, Any]]) -> pd.DataFrame:
    f = fits(docs)
    rows = [{"framework": fw, "processes": n, "points": v.points, "alpha": f"{v.alpha_s * 1e6:,.0f} us",
             "bandwidth 1/beta": (f"{v.bandwidth / 1e6:,.0f} MB/s" if math.isfinite(v.bandwidth) else "unbounded"),
             "worst |model - measured| / measured": f"{v.max_rel_residual:.2f}", "where": LOOPBACK}
            for (fw, n), v in f.items()]
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    order = framework_order(out["framework"])
    return out.iloc[sorted(range(len(out)), key=lambda i: (order.index(out["framework"].iloc[i]),
                                                           out["processes"].iloc[i]))].reset_index(drop=True)


@dataclass(frozen=True)
class Profile:
    """What the model takes from a framework's idiom, as measured in this run: its
    all-reduces per step for G gradient bytes (how it groups the gradients) and the
    embeddings' worth of bytes it all-reduces beyond G (JAX's program reduces the tied
    embedding's two gradient terms apart: one embedding more, whatever the model's size)."""
    framework: str
    extra_embeddings: int
    collectives_rule: str

    def collectives(self, nbytes: float) -> int:
        return commmodel.ddp_buckets(nbytes) if self.framework == "torch" else 1

    def nbytes(self, config: Any) -> float:
        """The bytes its step all-reduces for a GPT configuration."""
        from workloads import gpt
        shapes = gpt.param_shapes(config)
        g = sum(math.prod(s) for s in shapes.values()) * commmodel.GRAD_BYTES
        return g + self.extra_embeddings * math.prod(shapes["wte.weight"]) * commmodel.GRAD_BYTES


RULES = {"torch": "DDP's buckets (25 MiB, the first 1 MiB: its documented defaults)",
         "jax": "one all-reduce per step (XLA joins the gradients into one variadic all-reduce: 1 in every HLO "
                "counted here)",
         "tensorflow": "one all-reduce per step (the step's one batched ReplicaContext.all_reduce: 1 gradient op in "
                       "every graph counted here)"}


def _embedding_bytes(preset: Any) -> float | None:
    """The token embedding's bytes at a GPT preset (None for another workload's)."""
    from workloads import gpt
    try:
        return float(math.prod(gpt.param_shapes(gpt.preset(str(preset)).config)["wte.weight"]) * commmodel.GRAD_BYTES)
    except Exception:        # noqa: BLE001 - a preset this checkout does not know: no embedding count
        return None


def profiles(docs: list[dict[str, Any]]) -> list[Profile]:
    """Each framework's model inputs from its multi-process data-parallel GPT cases: the
    bytes its step all-reduced beyond the analytic, in embeddings of the run's preset
    (rounded: 1 for JAX, 0 for torch and TensorFlow, whose extra 4 bytes are the loss)."""
    c = cases(docs)
    out = []
    for fw in framework_order(c["framework"]) if len(c) else []:
        g = c[(c["framework"] == fw) & (c["processes"] > 1) & (c["status"] == "ok") & c["strategy"].isna()
              & (c["workload"] == "gpt")]
        extra = _med([(b - a) / e for b, a, e in zip(g["allreduce_bytes"], g["analytic_bytes"],
                                                   map(_embedding_bytes, g["preset"])) if b and a and e])
        out.append(Profile(fw, int(round(extra)) if extra is not None else 0, RULES.get(fw, "one all-reduce per step")))
    return out


def predictions(docs: list[dict[str, Any]], devices: Iterable[int] = PREDICTED_AT) -> pd.DataFrame:
    """The model at `devices` per GPT size and algorithm: the step's compute and one
    all-reduce of its gradients, the efficiency with no overlap and with the whole backward
    overlapped (the model's bounds for one all-reduce of G), and per framework the same
    bounds with its all-reduces per step and its bytes."""
    prof = profiles(docs)
    rows = []
    for name, cfg in commmodel.gpt_sizes().items():
        params, flops = commmodel.gpt_step(cfg)
        for n in devices:
            for alg in commmodel.ALGORITHMS:
                lo = commmodel.predict_step(params, flops, n, alg, 1, 0.0)
                hi = commmodel.predict_step(params, flops, n, alg, 1, 1.0)
                row = {"model": name, "devices": n, "all-reduce": alg,
                       "compute per step": stats.fmt_seconds(lo.compute_s),
                       "one all-reduce of the gradients": stats.fmt_seconds(lo.comm_s),
                       "efficiency, no overlap - backward overlapped": f"{lo.efficiency:.2f} - {hi.efficiency:.2f}"}
                for p in prof:
                    b, k = p.nbytes(cfg), p.collectives(p.nbytes(cfg))
                    e0, e1 = (commmodel.predict_step(params, flops, n, alg, k, o, nbytes=b).efficiency
                              for o in (0.0, 1.0))
                    row[p.framework] = f"{e0:.2f} - {e1:.2f} ({k} op{'s' if k > 1 else ''})"
                rows.append(row)
    return pd.DataFrame(rows)


def curves(docs: list[dict[str, Any]]) -> dict[str, dict[tuple[str, str], tuple[list[float], list[float]]]]:
    """The figure's data: per GPT size, per (framework, algorithm), the efficiencies at
    commmodel.DEVICES with no overlap and with the backward fully overlapped."""
    out: dict[str, dict[tuple[str, str], tuple[list[float], list[float]]]] = {}
    for name, cfg in commmodel.gpt_sizes().items():
        params, flops = commmodel.gpt_step(cfg)
        for p in profiles(docs):
            b = p.nbytes(cfg)
            k = p.collectives(b)
            for alg in commmodel.ALGORITHMS:
                out.setdefault(name, {})[(p.framework, alg)] = tuple(   # type: ignore[assignment]
                    [x.efficiency for x in commmodel.curve(params, flops, alg, k, o, nbytes=b)] for o in (0.0, 1.0))
    return out


def assumptions() -> list[str]:
    """The model's inputs that are not measured here, each with its source."""
    net = commmodel.INTERCONNECT
    return [f"Interconnect: {net.name}.", f"GPU peak: {net.peak_source}.", f"Utilisation: {net.mfu_source}.",
            f"NVLink bandwidth: {net.intra.bandwidth_source}; latency: {net.intra.alpha_source}.",
            f"Network bandwidth: {net.inter.bandwidth_source}; latency: {net.inter.alpha_source}.",
            f"Step: {commmodel.WORKLOAD_NOTE}.",
            "Per framework: its collectives per step (" + "; ".join(f"{k}: {v}" for k, v in RULES.items())
            + ") and its bytes (the analytic, plus one embedding for JAX as measured); the overlap of the "
              "all-reduces with the backward is shown as its bounds, none and all of the backward (the one "
              "measured here, on CPUs over loopback where the collectives share cores with the compute, says little "
              "of a GPU's)."]


@dataclass(frozen=True)
class Claim5:
    """Claim 5's pieces: what the run measured of the mechanism, and what the model states."""
    measured: str
    modelled: str


def claim5(df: pd.DataFrame) -> Claim5 | None:
    """Claim 5's row pieces from the report's distributed documents; None when there are none."""
    docs = documents(df)
    c = cases(docs)
    if c.empty:
        return None
    many = c[c["processes"] > 1]
    ok = many[many["status"] == "ok"]
    fws = framework_order(many["framework"]) if len(many) else []
    counts = sorted({int(n) for n in c["processes"]})
    launchers = sorted({str(x) for x in c["launcher"].dropna()})
    parts = [f"data parallel across {', '.join(map(str, counts))} processes ({'/'.join(launchers)}) on CPUs over "
             f"loopback: {', '.join(fws) or 'no framework'} checked against one device on every rank"
             + (f" (worst gradient error {ok['grad_rel'].max():.1e})" if len(ok) and ok["grad_rel"].notna().any()
                else "")]
    shares = [share(s, n) for s, n in zip(ok["step_s"], ok["nosync_s"])]
    shares = [x for x in shares if x is not None]
    if shares:
        parts.append(f"exposed communication share {min(shares):.2f}-{max(shares):.2f}")
    ratios = [b / a for b, a in zip(ok["wire_bytes"], ok["analytic_wire_bytes"])
              if _num(b) is not None and _num(a)]
    if ratios:
        parts.append(f"bytes on the wire {min(ratios):.2f}-{max(ratios):.2f}x the analytic")
    f = fits(docs)
    if f:
        parts.append("alpha-beta on this loopback " + ", ".join(
            f"{fw} {v.alpha_s * 1e6:,.0f} us / {v.bandwidth / 1e6:,.0f} MB/s" for (fw, _), v in f.items()))
    bad = many[many["status"] == "failed"]
    if len(bad):
        parts.append(f"{len(bad)} case(s) failed ({str(bad['reason'].iloc[0])[:120]})")
    name, cfg = next(iter(commmodel.gpt_sizes().items()))
    params, flops = commmodel.gpt_step(cfg)
    n = max(PREDICTED_AT)
    eff = {alg: (commmodel.predict_step(params, flops, n, alg, 1, 0.0).efficiency,
                 commmodel.predict_step(params, flops, n, alg, 1, 1.0).efficiency) for alg in commmodel.ALGORITHMS}
    net = commmodel.INTERCONNECT
    modelled = (f"modelled, not measured: on {net.gpu} ({net.inter.bandwidth / 1e9:.0f} "
                f"GB/s per GPU between nodes, vendor figures; latencies and {net.mfu:.0%} MFU "
                f"assumed) the alpha-beta model gives {name} at {n:,} GPUs a weak-scaling efficiency of "
                + ", ".join(f"{lo:.2f}-{hi:.2f} ({alg})" for alg, (lo, hi) in eff.items())
                + " from no overlap to a fully overlapped backward; the CPU run measures the mechanism only")
    return Claim5("; ".join(parts), modelled)
