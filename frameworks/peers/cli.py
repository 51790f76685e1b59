"""The peers' command line: one process per framework, each running its pairs; the table.

A parent process starts `python -m frameworks.peers --framework F --json FILE` for each framework
in turn (never two at once), reads their rows and writes the table: Markdown and JSON under
`--out`, and with `--record` the JSON the reports read (reports/data/peers.json, by device kind).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from frameworks.peers import TASKS, TOLERANCE, WORKLOADS
from workloads.base import FwbenchError, error_line
from workloads.case import FRAMEWORKS

RECORD = Path(__file__).resolve().parents[2] / "reports" / "data" / "peers.json"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m frameworks.peers",
                                 description="fwbench's GPT and DDPM beside Hugging Face transformers' and diffusers' "
                                             "on the same weights and inputs: outputs compared, then interleaved "
                                             "rounds; the ratio fwbench/peer with its 95%% interval")
    ap.add_argument("--framework", default=",".join(FRAMEWORKS), help="comma-separated (default: all three)")
    ap.add_argument("--workload", default=",".join(WORKLOADS), help="gpt, diffusion or both (default)")
    ap.add_argument("--task", default=",".join(TASKS), help="forward, train_step or both (default)")
    ap.add_argument("--modes", default=None, help="comma-separated modes (default: every mode of the framework)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--precision", default=None, choices=tuple(TOLERANCE),
                    help="fp32 (default on the CPU) or bf16 (default on cuda)")
    ap.add_argument("--preset", default=None, help="a preset for every workload or gpt=NAME,diffusion=NAME "
                                                   "(default: small on the CPU, gpt=gpt2,diffusion=ddpm-cifar on cuda)")
    ap.add_argument("--rounds", type=int, default=12, help="interleaved rounds per pair (default 12)")
    ap.add_argument("--block-s", type=float, default=0.5, help="seconds a block of calls lasts (default 0.5)")
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads (default: every CPU)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for peers.md and peers.json")
    ap.add_argument("--record", action="store_true", help="also write the table the reports read "
                                                          "(reports/data/peers.json, under this device kind)")
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)     # a child's rows
    return ap


def names(text: str, valid: tuple[str, ...], what: str) -> list[str]:
    out = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in out if n not in valid]
    if bad or not out:
        raise FwbenchError(f"unknown {what} {', '.join(bad) or repr(text)} (valid: {', '.join(valid)})")
    return out


def check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One line for each bad argument (argparse's error: usage and the line, exit 2)."""
    try:
        args.frameworks = names(args.framework, FRAMEWORKS, "framework")
        args.workloads = names(args.workload, WORKLOADS, "workload")
        args.tasks = names(args.task, TASKS, "task")
        from frameworks.harness.options import parse_presets
        args.precision = args.precision or ("bf16" if args.device == "cuda" else "fp32")
        default = "gpt=gpt2,diffusion=ddpm-cifar" if args.device == "cuda" else "small"
        args.presets = parse_presets(args.preset or default, tuple(args.workloads))
    except FwbenchError as e:
        ap.error(str(e))
    for k in ("rounds", "threads"):
        if getattr(args, k) is not None and getattr(args, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be at least 1, got {getattr(args, k)}")
    if args.block_s <= 0:
        ap.error(f"--block-s must be positive, got {args.block_s}")


def run_children(args: argparse.Namespace, argv: list[str]) -> list[dict[str, Any]]:
    """Each framework's pairs in a process of its own, one after the other."""
    rows: list[dict[str, Any]] = []
    for fw in args.frameworks:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            cmd = [sys.executable, "-m", "frameworks.peers", *strip(argv, "--framework", "--out", "--json"),
                   "--framework", fw, "--json", out]
            cmd = [c for c in cmd if c != "--record"]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            print(f"peers: {fw} took {time.perf_counter() - t0:.0f} s (exit {proc.returncode})", flush=True)
            if os.path.exists(out):
                with open(out) as f:
                    rows += json.load(f)
            else:
                tail = [line for line in proc.stdout.strip().splitlines() if line.strip()][-1:] or ["no output"]
                rows.append({"framework": fw, "status": "failed",
                             "reason": f"its process ended with exit {proc.returncode}: {tail[0][:200]}"})
    return rows


def strip(argv: list[str], *options: str) -> list[str]:
    """argv without `options` and their values (either `--opt v` or `--opt=v`)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in options:
            skip = True
            continue
        if any(a.startswith(o + "=") for o in options):
            continue
        out.append(a)
    return out


def machine(args: argparse.Namespace) -> dict[str, Any]:
    """Where and when the table was measured, and with what."""
    from importlib import metadata

    from frameworks.harness.machine import cpu_name
    from workloads.base import available_cpus, git_commit
    versions = {}
    for pkg in ("torch", "jax", "flax", "tensorflow", "tf_keras", "transformers", "diffusers", "optax"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {"device": args.device, "cpu": cpu_name(), "threads": args.threads or available_cpus(),
            "precision": args.precision, "presets": args.presets, "rounds": args.rounds, "block_s": args.block_s,
            "date": datetime.date.today().isoformat(), "commit": git_commit(), "versions": versions,
            "command": "python -m frameworks.peers " + " ".join(sys.argv[1:])}


def table(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    """The Markdown table: a row per pair, the ratio fwbench/peer with its interval."""
    lines = [f"# fwbench against its peers ({info['device']}, {info['precision']})", "",
             f"{info['cpu']}, {info['threads']} threads; presets {info['presets']}; {info['rounds']} interleaved "
             f"rounds per pair, blocks of about {info['block_s']} s; {info['date']}, commit {info['commit']}.",
             f"Versions: {', '.join(f'{k} {v}' for k, v in info['versions'].items() if v)}.",
             f"Command: `{info['command']}`", "",
             "Ratio = fwbench's time per call over the peer's, the median of the per-round ratios with its 95% "
             "interval (from the rounds' order statistics: distribution-free); below 1 fwbench is faster. Outputs "
             "are compared before timing (difference: max |a - b| / max |b| of the logits or eps, or of the first "
             "two losses of a train step).", "",
             "| framework | workload | task | mode | peer | fwbench ms | peer ms | ratio [95% CI] | difference "
             "| note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"| {r['framework']} | {r.get('workload', '')} | {r.get('task', '')} | {r.get('mode', '')} "
                         f"| {r.get('peer', '')} | | | {r.get('status')} | {fmt(r.get('difference'))} "
                         f"| {r.get('reason', '')} |")
            continue
        lines.append(f"| {r['framework']} | {r['workload']} | {r['task']} | {r['mode']} | {r['peer']} "
                     f"| {r['fwbench_s'] * 1e3:.2f} | {r['peer_s'] * 1e3:.2f} "
                     f"| {r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}] | {fmt(r['difference'])} "
                     f"| {r.get('note', '')} |")
    return "\n".join(lines) + "\n"


def fmt(x: Any) -> str:
    return "" if x is None else f"{x:.1e}"


def record(rows: list[dict[str, Any]], info: dict[str, Any], path: Path = RECORD) -> None:
    """Write this table into the reports' peers file under its device kind."""
    have = json.loads(path.read_text()) if path.exists() else {}
    have[info["device"]] = {"machine": info, "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(have, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    argv = sys.argv[1:] if argv is None else argv
    ap = parser()
    args = ap.parse_args(argv)
    check_args(ap, args)
    from frameworks.base import set_threads
    args.threads = set_threads(args.threads)
    if args.json:                       # a child: one framework, in this process
        from frameworks.peers.pairs import run_framework
        rows = run_framework(args.frameworks[0], args)
        with open(args.json, "w") as f:
            json.dump(rows, f)
        return rows
    rows = run_children(args, argv)
    info = machine(args)
    text = table(rows, info)
    print(text, flush=True)
    if args.out:
        out = Path(args.out).resolve()
        out.mkdir(parents=True, exist_ok=True)
        (out / "peers.md").write_text(text)
        (out / "peers.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1) + "\n")
    if args.record:
        record(rows, info)
    return rows


__all__ = ["main", "error_line"]
