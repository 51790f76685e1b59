#!/usr/bin/env bash
# Issue 43's closing table, on an idle machine: data parallel across 1 and 2 processes per
# framework (torch DDP, multi-controller JAX, TensorFlow MultiWorkerMirroredStrategy), each a
# Slurm job step (srun --ntasks=N), the GPT train step at the small preset, 1 cold and 2 warm
# repeats of 20 timed steps each; then the processes x frameworks table (step, communication
# share, overlap, bytes on the wire against the analytic, efficiency t(1)/t(N)), the alpha-beta
# fit of the measured all-reduces and the model at 64 / 1,024 / 4,096 GPUs, printed and written
# to <out>/distributed/summary.md. About 15-25 minutes on a 2-core machine.
#
#   bash tests/measure/measure_distributed.sh [OUT]        # as root where no Slurm answers yet
#
# It starts the CI's one-node Slurm (.ci/slurm-up) when sinfo finds none, and stops it after.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-dist-closing}
if ! sinfo -h >/dev/null 2>&1; then
  eval "$(bash .ci/slurm-up)"
  trap 'bash .ci/slurm-down' EXIT
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"       # this checkout's code, in every rank too
python -m reports run --processes-per-case 1,2 --launcher slurm --framework torch,jax,tensorflow \
  --workload gpt --preset small --quick --rounds 20 --cold 1 --warm 2 --timeout-s 1800 --out "$out"
