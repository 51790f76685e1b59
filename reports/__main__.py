"""`python -m reports` is the `fwbench` command."""
from reports.cli import main

raise SystemExit(main())
