"""Utilities, the bottom layer: writes a reader never sees half of (atomic), the signals that
end a command (signals), one escaping function per output format (escape) and the pytest plugin
each framework process loads (pytest_events, as `-p reports.util.pytest_events`). They import
nothing else of reports, no framework and not pandas, so the plugin and the command line start
quickly."""
