"""The report's Method section: how every number of the report was made, in the words of the
run's design (a run of process sets, or lone processes: reports.measures.data.unit), and the
facts of fwbench's code that make the frameworks' work differ, said once here."""
from __future__ import annotations

import pandas as pd

from reports.conclusions import claims
from reports.measures import data as rdata
from reports.measures import stats
from reports.rendering import sections as drawings
from workloads.framework_facts import FACTS

# What each framework's `compilations` counter counts (the record's compile_counter has the details).
COUNTERS = {name: f.counter for name, f in FACTS.items()}

# The report's method text: facts of fwbench's code that make the frameworks' work differ,
# said once here (the set-up table adds each run's recorded settings).
METHOD = {
    "compiled mode": "What `compiled` compiles differs per framework. torch: torch.compile compiles the model "
                     "(forward, and backward through AOTAutograd); the fused AdamW update runs eagerly in the "
                     "default compiled case, so a torch train step compiles less than the others do. JAX "
                     "(jax.jit) and TensorFlow (tf.function with jit_compile=True) compile forward + backward + "
                     "gradient clipping + AdamW as one program.",
    "eager mode": "JAX's and TensorFlow's eager modes run op by op (JAX compiles each primitive on first use); "
                  "nobody uses them for speed, so a speedup over them is labelled 'op-by-op eager', and the "
                  "\"as high as 40%\" claim is tested on torch.compile against torch eager only.",
    "generate": "torch decodes in a Python loop around a compiled step; JAX (lax.fori_loop) and TensorFlow "
                "(tf.while_loop) compile the whole decode loop.",
    "sample": "torch compiles one sampler step (t, a, b as tensors) and loops in Python; JAX (lax.scan) and "
              "TensorFlow (tf.while_loop) compile the whole sampling loop.",
    "layouts": "JAX and TensorFlow run the GPT's dense layers on flat (B*T, C) rows; torch keeps (B, T, C). "
               "Layout conversions happen once, when parameters are loaded.",
    "runtime": "Every framework runs in its own process with the same intra-op thread count and C heap policy; "
               "other runtime settings (XLA flags, allocators) are listed per framework in the set-up table.",
}


def startup_method(df: pd.DataFrame) -> str:
    """The Method's sentence on the compiler's one-off start-up: measured apart where
    the runs recorded it, else said to be in the first compiled case of each process."""
    if any(r.get("compiler_startup") for r in df.attrs.get("runs", [])):
        return ("Each process first compiles a throw-away program in each compiled mode (its compiler start-up, "
                "Appendix C), so that one-off cost is not charged to whichever case runs first (Appendix C states "
                "what still is).")
    return ("These runs predate the compiler start-up measured apart: the first compiled case of each process "
            "carries the compiler's one-off start-up in its first call.")


SIDE_METHOD = [
    "Process sets (fwbench run, docs/design/statistics.md): each set ran one process per framework and a second "
    "process of one framework (the A/A control), all alive together, started in an order drawn per set; task by "
    "task (an order drawn per set) each process measured the task's cases in turn, exactly as alone (a fresh "
    "in-process compile state per case, the first call cold in a cold set and warm in a warm one, warm-up, its own "
    "rounds), then every configuration got one untimed call, then the configurations took turns in cycles: each "
    "cycle one block of every configuration (its calls sized to about the same wall time), in an order drawn per "
    "cycle, one block at a time, the other processes waiting in a blocking read. Python's garbage collector is "
    "collected before and off during each block; the compilation counter is read around each block.",
    "Intervals: a configuration's steady time is the geometric mean of its blocks per set, and over the run the "
    "geometric mean over sets with a Student-t interval over sets (df = sets - 1); two configurations of a task "
    "compare paired by set (the per-set mean of each cycle's log ratio, t over sets), so the machine's state during "
    "a cycle falls on both. First calls come from the processes as before: cold ones from cold sets, warm ones "
    "from warm sets. The control process's configurations enter no value, verdict or comparison of the family: "
    "they are the A/A controls (Side by side).",
]


# The Method's paragraphs on timing, in the order method_lines prints them: how a call is timed,
# the processes' roles (lone processes, or sets), and the intervals over processes.
HOW_TIMED = (
    "Each framework ran in its own processes with the same intra-op thread count; timed callables "
    "synchronise with the device and with everything the step changed; Python's garbage collector is "
    "collected and switched off before the warm-up calls and stays off through the timed rounds; inputs "
    "rotate between rounds.")
LONE_ROLES_METHOD = (
    "Processes: each framework ran cold processes (every case starts from a fresh in-process compile state and, "
    "in torch and JAX, an empty cache folder of its own, so a first call compiles everything whatever ran "
    "before it; their caches are then merged into the run's) and warm processes (fresh in-process state, the "
    "run's filled cache). Steady state comes from warm processes only; cold processes give cold first calls "
    "and the cold/warm step ratio. TensorFlow's XLA cache keys its entries by tf.function's process-unique "
    "names, so a warm TensorFlow process mostly compiles again (its warm first calls say so).")
SETS_ROLES_METHOD = (
    "Cold and warm sets: in a cold set every case starts from a fresh in-process compile state and, in torch and "
    "JAX, an empty cache folder of its own, so a first call compiles everything whatever ran before it (the "
    "caches are then merged into the run's); a warm set's processes start from a fresh in-process state and the "
    "run's filled cache. Steady state comes from every set's blocks, cold and warm; the cold sets alone give the "
    "cold first calls, and their blocks over the warm sets' the cold/warm step ratio. TensorFlow's XLA cache keys "
    "its entries by tf.function's process-unique names, so a warm TensorFlow process mostly compiles again (its "
    "warm first calls say so).")
PROCESS_INTERVALS = (
    "a case's step is the geometric mean of its processes' medians with a Student-t interval on "
    "the log process medians (df = processes - 1); ratios between processes use Welch's standard error on the "
    "two log means with Hsu's conservative df = min(processes a, processes b) - 1, contrasts within the same "
    "processes (a mode against eager, a transform against its loop, a new- against a seen-shape request) a t "
    "interval on the per-process log ratios. Coverage was checked by "
    "simulation at the default allocation with the variance components measured on the development machine "
    "(tests/test_reports_stats.py). A case of one process shows the order-statistic interval of its rounds "
    "(round noise only), a case of two its processes' min-max (a df = 1 interval spans +-12.7 standard errors); "
    "neither is tested against anything (a comparison needs 3 processes a side and only then joins the Holm "
    "family).")


def timing_method(sets: bool) -> list[str]:
    """How a call is timed, the processes' roles and the intervals over processes; in a run of sets
    the sets' roles, and the intervals over processes said to be of what is measured once per process."""
    if not sets:
        return [HOW_TIMED, LONE_ROLES_METHOD, "Intervals: " + PROCESS_INTERVALS]
    return [HOW_TIMED, SETS_ROLES_METHOD, "Intervals of what is measured once per process (first calls; the "
            "per-process numbers of the dynamic, derivatives and serving sections): " + PROCESS_INTERVALS]


FLAGS_METHOD = [
    "Flags: every stated verdict is recomputed on the second half of each process's rounds and with each side's "
    "most deviant process replaced by the others' median; a case is flagged only where that changes a verdict's "
    "class, where processes were left out because the machine was busy during its timed rounds (other "
    "processes' CPU use or steal time, recorded per case; the harness measures such a case again after waiting "
    "for a quiet machine, and a measurement still busy enters no number), where it recompiled during the timed "
    "rounds, or where a first call compiled nothing.",
]
def choice_method(unit: str = "processes") -> str:
    """The Method's choice per job, in the words of the run's unit of replication (processes, or sets)."""
    return (
        "The choice per job: a configuration is framework x mode x strategy (eager included); a job's cost, in a "
        "fresh process, is the compiled mode's compiler start-up (Appendix C; none for eager modes or for runs "
        "from before it was measured apart) + first call + N x steady step (M examples: M / examples per call "
        "calls; a stream: its cold pass, then the other requests at the warm per-request rate). Its 95% interval "
        f"comes from draws of each term's t distribution over {unit} (a cold first call at the spread pooled "
        "over its framework's cases of the mode, as Appendix C prints it), the terms drawn independently; a term "
        f"from fewer than {stats.MIN_TESTED} {unit} leaves the cost without one (never a range). Every pair of "
        "frameworks' cheapest configurations is tested on the ratio of their costs' draws at 1 - 5%/pairs "
        "(Bonferroni over the job's pairs): a framework is named cheapest against those it is resolved below, "
        "'not resolved against' the others. Where the cheapest configuration changes with N, the change's N has "
        "the 95% interval of the two costs' crossing, or reads 'not resolved' where the two steps do not differ "
        "at 95%.")


UTILISATION_METHOD = [
    "utilisation = model FLOPs per step / step time / the machine's GEMM rate at the case's precision "
    "(fp32, tf32 or bf16): the best rate any run on the same set-up measured with one instrument, a "
    "framework's own n x n matmul at that precision (at fp32 on the CPU numpy's BLAS too); MFU divides "
    "by the case's own processes' measured peak, the same instrument.",
    "model FLOPs are counted once per workload task by its formula (GPT: PaLM's 6N + 12LHQT per trained "
    "token, N the parameters without the position embedding; DDPM: 2 FLOPs per multiply-add of every conv, "
    "dense and attention product; a train step is 3x the forward pass), the same for every framework. MFU = "
    "model FLOPs per step / step time / the device's peak GEMM rate at the case's precision (bf16, fp32, or "
    "TF32 for fp32 at matmul precision tf32 on a GPU), as measured by the framework's own matmul before the "
    "first case (the best over processes), and against the vendor's dense datasheet peak where the GPU is "
    "known (frameworks.harness.gemm.VENDOR_PEAKS).",
]


def verdict_method(fam: stats.Family, unit: str = "processes") -> list[str]:
    """The Method's verdict rule and error rate: the margin, the family's size and the unit of replication."""
    m = f"{100 * fam.margin:.0f}%"
    return [
        f"Verdicts against a margin of {m} (--margin): faster or slower by at least the margin (the whole interval "
        f"beyond it), faster or slower (the interval excludes 1 but reaches inside the margin), equivalent within "
        f"+-{m} (the interval contains 1 and lies inside the margin), inconclusive (the interval contains 1 and "
        f"reaches beyond the margin), not tested (fewer than {stats.MIN_TESTED} {unit} on a side). `fwbench compare` "
        "uses the same.",
        f"One error rate: the report's {fam.m} tested comparisons share one 5% chance that any 'faster' or "
        "'slower' of this report is false, whatever the other comparisons' truth: Holm's step-down procedure in "
        "two groups, the comparisons against an op-by-op eager mode (JAX's, TensorFlow's) with 1% and the others "
        "(between frameworks, torch's modes) with 4%, a group's share passing to the other once all its "
        "comparisons are stated (a graphical Holm procedure, Bretz et al. 2009), so how strict the comparisons "
        "between frameworks are does not depend on how many trivially large op-by-op differences a report holds. "
        "Each difference is read on the interval at the level of its Holm step (1 - alpha' / (m - j + 1) for the "
        "j-th smallest p-value of its group; those Holm keeps at the level where it stopped), so it excludes 1 "
        "exactly when a difference is stated. Equivalence is two one-sided tests at the same alpha': the "
        "interval at 1 - 2 alpha', shown with its level, inside the margin. Tables show plain 95% intervals.",
    ]


def method_lines(df: pd.DataFrame, fam: stats.Family) -> list[str]:
    """The Method section: how every number of the report was made (a run of process sets: its
    own description of processes and intervals first)."""
    side, unit = rdata.side_by_side(df), rdata.unit(df)
    return [*(SIDE_METHOD if side else []), *timing_method(side), *verdict_method(fam, unit), *FLAGS_METHOD,
        "first call = wall time of the first call (trace + compile + run): cold in cold processes, warm in warm ones; "
        "a non-eager first call that compiled nothing reused code and is left out. " + startup_method(df)
        + " compile latency = a non-eager mode's cold first call minus the same mode's steady step (eager modes "
        "have none); break-even = the first step count n at which first call + (n-1) x step is below eager's, "
        "stated when the steps are faster by the verdicts ('never' when slower); their intervals come from draws "
        "of the same t distributions.",
        "compilations count each framework's own events: " + "; ".join(f"{f}: {c}" for f, c in COUNTERS.items())
        + ". They are not comparable across frameworks; a compilation during the timed rounds is flagged.",
        *[f"{k}: {v}" for k, v in METHOD.items()], choice_method(unit), *claims.rules(unit),
        *drawings.method(df),
        *UTILISATION_METHOD]
