"""The scale-out section's drawing half (its judging half: reports.sections.scaleout): each
framework's data parallel in words, weak scaling, exposed communication, the slowdown split
into its non-communication and communication factors, per-device state memory, what a step
communicates, the equivalence checks and placement, and published results for orientation."""
from __future__ import annotations

import pandas as pd

from reports.analysis import scaleout, stats
from reports.rendering.sections.common import Block, Drawing


def blocks(df: pd.DataFrame, fam: stats.Family) -> list[Block]:
    """Data-parallel train steps against one device (reports.analysis.scaleout)."""
    if not scaleout.has(df):
        return []
    weak = scaleout.judged(df, fam.margin)     # its own family, at the report's margin
    b: list[Block] = [
        ("h", 2, "Scale-out: data parallel"),
        ("p", "Each framework's idiomatic data parallel: torch DistributedDataParallel (one process per device, "
              "gloo on CPUs, NCCL on CUDA), JAX's jitted step over a device mesh with the batch sharded and the "
              "parameters replicated (GSPMD inserts the all-reduce), TensorFlow's MirroredStrategy (a custom "
              "training loop with one batched all-reduce). Strategies beside it: 'sharded' (ZeRO-3 / FSDP: torch "
              "FSDP2 fully_shard per block; JAX parameters and optimizer state sharded on the mesh, gathered "
              "where the loss uses them; TensorFlow has none here: its parameter sharding is DTensor, not built) "
              "and the 'no-sync' probe (the same step with its gradient synchronisation left out: torch no_sync, "
              "JAX shard_map without the reduction, TensorFlow's step without its all-reduce). The idioms differ "
              "in what they communicate: FSDP2 gathers every parameter twice (forward and backward), JAX's "
              "compiled program keeps the first gather for the backward, and reduces gradients by all-reduce "
              "where the CPU backend has no reduce-scatter (collectives table). Weak scaling: every device keeps "
              "the preset's batch, "
              "so the ideal N-device step takes as long as the one-device step with the same threads per device. "
              "Before timing, every data-parallel case's reduced gradients (before clipping) on the first global "
              "batch had to match a one-device model's, and its parameters after 3 AdamW steps on the same global "
              "batches too (table below). The verdicts are on t(N)/t(1) "
              "paired by round of the run, in a Holm family of this section's own. A case with more devices x "
              "threads than CPUs measures sharing and gets no efficiency. " + scaleout.CAVEAT),
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
    return b


DRAWING = Drawing(name="scaleout", blocks=blocks)
