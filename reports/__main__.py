"""`python -m reports` is the `fwbench` command."""
from reports.commands.cli import main

raise SystemExit(main())
