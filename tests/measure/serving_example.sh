#!/usr/bin/env bash
# The committed example of the serving section (issue 44): the serving workload at the small
# preset on the 2-core machine in process sets, one cold and three warm (steady state comes from
# the warm sets only: three is the least that gives every latency percentile, throughput and
# cold start an interval over sets, and claim 6 a tested verdict), then its report. Run it on an
# idle machine, from a checkout installed with `pip install -e ".[all]" -c constraints/cpu.txt`:
# every set exports each artefact path of both tasks and serves each path from a fresh process
# (docs/design/serving.md, "Cost").
set -euo pipefail
cd "$(dirname "$0")/../.."
out=reports/examples/cpu-2core-serving
fwbench run --workload serving --preset small --cold 1 --warm 3 --threads 2 --out "$out"
