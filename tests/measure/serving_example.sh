#!/usr/bin/env bash
# The committed example of the serving section (issue 44): the serving workload at the small
# preset on the 2-core machine, one cold and two warm processes per framework (three: the
# least that gives each latency percentile, throughput and cold start an interval over
# processes, and claim 6 a tested verdict), then its report. Run it on an idle machine, from a
# checkout installed with `pip install -e ".[all]" -c constraints/cpu.txt`: it exports 15 paths
# x 2 tasks per process set and serves each from a fresh process (about 1-1.5 hours here).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=reports/examples/cpu-2core-serving
fwbench run --workload serving --preset small --cold 1 --warm 2 --threads 2 --out "$out"
