"""The scale-out section's drawing half (its judging half: reports.sections.scaleout): each
framework's data parallel in words, weak scaling, exposed communication, the slowdown split
into its non-communication and communication factors, per-device state memory, what a step
communicates, the equivalence checks and placement, and published results for orientation;
then data parallel across processes (reports.measures.distributed), the alpha-beta
fit and the model's predictions, with the model's curves as one figure (model_figure)."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.measures import distributed, scaleout, stats
from reports.measures.data import framework_order
from reports.rendering import figures as F
from reports.rendering.sections.common import Block, Drawing, Plot
from workloads import commmodel

MODEL_FIGURE = "scaleout-model"


# The section's opening paragraph: each framework's idiom, what it communicates, how it is judged.
IDIOMS = ("Each framework's idiomatic data parallel: torch DistributedDataParallel (one process per device, "
          "gloo on CPUs, NCCL on CUDA), JAX's jitted step over a device mesh with the batch sharded and the "
          "parameters replicated (GSPMD inserts the all-reduce), TensorFlow's MirroredStrategy (a custom "
          "training loop with one batched all-reduce). Strategies beside it: 'sharded' (ZeRO-3 / FSDP: torch "
          "FSDP2 fully_shard per block; JAX parameters and optimizer state sharded on the mesh, gathered where "
          "the loss uses them; TensorFlow has none here: its parameter sharding is DTensor, not built) and the "
          "'no-sync' probe (the same step with its gradient synchronisation left out: torch no_sync, JAX "
          "shard_map without the reduction, TensorFlow's step without its all-reduce). The idioms differ in "
          "what they communicate: FSDP2 gathers every parameter twice (forward and backward), JAX's compiled "
          "program keeps the first gather for the backward, and reduces gradients by all-reduce where the CPU "
          "backend has no reduce-scatter (collectives table). Weak scaling: every device keeps the preset's "
          "batch, so the ideal N-device step takes as long as the one-device step with the same threads per "
          "device. Before timing, every data-parallel case's reduced gradients (before clipping) on the first "
          "global batch had to match a one-device model's, and its parameters after 3 AdamW steps on the same "
          "global batches too (table below). The verdicts are on t(N)/t(1) paired by round of the run, in a "
          "Holm family of this section's own. A case with more devices x threads than CPUs measures sharing and"
          " gets no efficiency. ")


def blocks(df: pd.DataFrame, fam: stats.Family) -> list[Block]:
    """Data-parallel train steps against one device (reports.measures.scaleout), then across
    processes (reports.measures.distributed)."""
    docs = distributed.documents(df)
    if not scaleout.has(df):
        return [("h", 2, "Scale-out: data parallel"), *process_blocks(docs)] if docs else []
    weak = scaleout.judged(df, fam.margin)     # its own family, at the report's margin
    b: list[Block] = [
        ("h", 2, "Scale-out: data parallel"),
        ("p", IDIOMS + scaleout.CAVEAT),
        ("table", weak, "Weak scaling: one step on N devices against one device, the same per-device batch and "
                        "threads per device.", "scaleout") if len(weak) else
        ("p", "Weak scaling: no data-parallel case has a one-device twin in these results (run with --devices "
              "1,N to time both)."),
        ("table", scaleout.communication(df), "Exposed communication: the data-parallel step against the same "
                                             "step without gradient synchronisation (no-sync probe) and against "
                                             "the sharded form, paired within processes (95% t interval over "
                                             "them). A share near 0 means the synchronisation is hidden or cheap; "
                                             "the probe is no training step and is never compared with one "
                                             "device.", "scaleout-communication"),
        ("table", scaleout.slowdown_split(df), "What the N-device slowdown is made of: t(N)/t(1) = (no-sync step / "
                                              "one device) x (data parallel / no-sync step). The first factor is "
                                              "what N devices cost with no gradient synchronisation at all (devices "
                                              "sharing cores, a thread pool or memory bandwidth): it is not "
                                              "communication, and where devices share cores not scaling either; "
                                              "the second is what the synchronisation adds. Paired as above (95% t "
                                              "interval over processes); 'cores' compares devices x threads with "
                                              "the machine's CPUs from the record.", "scaleout-split"),
        ("table", scaleout.memory(df), "Memory per device, data parallel against sharded: the parameters and "
                                      "optimizer state device 0 holds between steps, counted from each framework's "
                                      "own arrays (the instrument column). Not an allocator peak: simulated CPU "
                                      "devices in one process (JAX, TensorFlow) share one allocator, which keeps no "
                                      "per-device peak, and the activations and the parameters a sharded step "
                                      "gathers while it runs are not in it.", "scaleout-memory"),
        ("table", scaleout.collectives(df), "What one data-parallel step communicates, by each framework's own "
                                           "account where it gives one, as bytes per device on a ring (an "
                                           "all-reduce moves 2(N-1)/N of its tensor, an all-gather or a "
                                           "reduce-scatter (N-1)/N), against the analytic: every gradient "
                                           "all-reduced once for data parallel; for the sharded form the "
                                           "parameters all-gathered in the forward and again in the backward "
                                           "and the gradients reduce-scattered, 1.5x data parallel.",
         "scaleout-collectives"),
        ("table", scaleout.checks(df), "Equivalence with one device before timing, and how the devices were "
                                      "placed on CPUs.", "scaleout-checks"),
        ("table", scaleout.ANCHORS, "Published scale-out results, cited, not measured: orientation for what "
                                    "the same frameworks reach on accelerator clusters.", "scaleout-anchors")]
    return b + process_blocks(docs)


CANNOT = ("What this measurement cannot show: the processes' collectives run over the kernel's loopback TCP "
          "and share the CPUs with their compute, so neither the communication's speed nor its overlap with the "
          "backward says anything about NVLink or InfiniBand, about NCCL (its algorithms, its hierarchy across "
          "nodes, its copy engines), about many nodes (stragglers, a congested network, a shared filesystem) or "
          "about the GPUs' own speed. It shows the mechanism: that each framework's own distributed idiom joins "
          "processes started by the cluster, reduces the right gradients on every rank (the check), and what it "
          "sends and how often (the framework's own count against the analytic).")


def process_blocks(docs: list[dict]) -> list[Block]:
    """Data parallel across processes (one process per device, each framework's distributed
    runtime), its alpha-beta fit and the model's predictions; [] without documents."""
    if not docs:
        return []
    fits = distributed.fit_table(docs)
    b: list[Block] = [
        ("h", 3, "Across processes: one process per device"),
        ("p", "Each framework's own multi-process data parallel, one CPU device per process, the processes started "
              "by Slurm (srun --ntasks=N) or by fwbench's local launcher and joined by the framework's runtime: torch "
              "DistributedDataParallel over torch.distributed (gloo) from the launcher's environment; multi-controller "
              "JAX (jax.distributed.initialize, gloo CPU collectives) with the model's own jitted step over a global "
              "mesh; TensorFlow's MultiWorkerMirroredStrategy (TF_CONFIG, or SlurmClusterResolver under srun). "
              "Before anything is timed every rank checks its data-parallel step against a one-device model on the "
              "global batch (the reduced gradients before clipping, then the parameters after 3 AdamW steps); a "
              "rank that fails fails the case. The step is rank 0's median over the timed rounds; the no-sync step "
              "is the same step without its synchronisation (the compute-only reference); the collectives alone "
              "are the step's all-reduces replayed with the framework's own collective (the same tensors); the "
              "communication share is 1 - t(no-sync) / t(step), the overlap 1 - (t(step) - t(no-sync)) / "
              "t(collectives alone) within [0, 1]. Weak scaling: every process keeps the preset's batch, so "
              "t(1) / t(N) is the efficiency. " + CANNOT),
        ("table", distributed.table(docs), "Processes x frameworks: one step on N processes (medians over the job "
                                           "steps), communication measured apart, all-reduce bytes by the framework's "
                                           "own account against the analytic (every gradient once), efficiency "
                                           "against the 1-process step of the same repeat, and the check's worst error "
                                           "over every rank.", "scaleout-processes")]
    if len(fits):
        b.append(("table", fits, "The alpha-beta fit: t = 2(N-1) alpha + 2(N-1)/N S beta (a ring all-reduce of S "
                                 "bytes) fitted to all-reduces of 4 B to 4 MiB measured with each framework's own "
                                 "collective between its processes (least squares on relative error; the worst "
                                 "point's relative residual says how well a line describes this link). Functional: "
                                 "a loopback link on a shared CPU, not an interconnect.", "scaleout-alpha-beta"))
    b += [("p", "A model, stated as one: the alpha-beta cost of a ring (2(N-1) alpha + 2(N-1)/N S beta) and of a "
                "double binary tree (2 ceil(log2 N) alpha + 2 S beta) all-reduce of the gradients, added to the "
                "step's compute, less what the backward hides: t(N) = t_compute + max(0, c t_latency + t_bandwidth - "
                "o 2/3 t_compute), efficiency t_compute / t(N). Its assumptions: " + " ".join(distributed.assumptions())
                + " Nothing of it is measured on accelerators; the rows below are the model's, not results."),
          ("table", distributed.predictions(docs), "The model's weak-scaling efficiency at 64, 1,024 and 4,096 GPUs "
                                                   "(from no overlap to the whole backward overlapped), per framework "
                                                   "with its all-reduces per step and bytes: a prediction from stated "
                                                   "assumptions, not a measurement.", "scaleout-model")]
    return b


def model_figure(df: pd.DataFrame) -> Figure | None:
    """The model's efficiency against devices (8 ... 4,096), one panel per GPT size: per
    framework (colour) and algorithm (ring solid, tree dashed), the line with no overlap and
    the band up to a fully overlapped backward; None without distributed documents."""
    curves = distributed.curves(distributed.documents(df))
    if not curves:
        return None
    fws = framework_order({fw for c in curves.values() for fw, _ in c})
    col = F.colours(fws)
    n = np.array(commmodel.DEVICES)
    with F._style():
        fig, axes = F.panel_grid(len(curves), 2, w=3.8, h=3.0)
        for ax, (name, c) in zip(axes, curves.items()):
            for (fw, alg), (lo, hi) in c.items():
                ls = "-" if alg == "ring" else "--"
                ax.plot(n, lo, ls, color=col[fw], lw=1.4)
                ax.fill_between(n, lo, hi, color=col[fw], alpha=0.12, lw=0)
            ax.set_xscale("log", base=2)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"{name} (model)")
            ax.set_xlabel("GPUs")
            ax.set_ylabel("weak-scaling efficiency (model)")
        extra = [Line2D([], [], color="black", ls="-", label="ring"), Line2D([], [], color="black", ls="--",
                                                                              label="tree")]
        F._framework_legend(fig, fws, col, extra)
    return fig


DRAWING = Drawing(name="scaleout", blocks=blocks, figures=(Plot(
    MODEL_FIGURE, model_figure, (), "The alpha-beta model's weak-scaling efficiency of data parallel for GPT-2 124M "
    "and "
    "1.5B on H100s (NVLink inside a node, 400 Gb/s InfiniBand between nodes; vendor figures, latencies and utilisation "
    "assumed), per framework (its all-reduces per step and bytes as measured in this run), ring (solid) and tree "
    "(dashed): the line with no overlap, the band up to the whole backward overlapped. A model, not a measurement."),))
