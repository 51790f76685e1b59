"""What the tests share: helpers, the equivalence and precision checks with their tolerances, each
framework's primitives, and result files as pytest-benchmark writes them (reports_fixtures)."""
