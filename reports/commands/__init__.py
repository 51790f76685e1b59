"""Commands, the top layer: the `fwbench` command line (cli) and `fwbench run` (runner and the
modules it is split into: the launchers, process sets, data-parallel jobs). Imports no framework:
framework processes are started as commands."""
