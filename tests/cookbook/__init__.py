"""What a user of each framework writes instead of fwbench's derivatives models: one module
per framework (torch.py, jax.py, tensorflow.py), each with

    make(task, strategy, mode, config, inputs, kwargs, params) -> Callable | None

`task`, `strategy` and `mode` name a fwbench derivatives case; `config` is the preset's
workloads.derivatives.DerivativesConfig; `inputs` the task spec's inputs as framework arrays
(what the harness passes: adapter.asarray of each numpy array, Python ints as they are);
`kwargs` the spec's keyword arguments; `params` the workload's numpy parameters (the
ensemble's GPTs). The callable takes the same positional inputs and kwargs as fwbench's model
method and returns the same structure, written the way the framework's own docs and
tutorials write it and compiled as a user would in that mode; None where the strategy has no
cookbook form (the module says why). A cookbook module never imports fwbench's
frameworks/<fw>/derivatives.py; it may use frameworks/<fw>/gpt.py, the model under test.

tests/measure/measure_cookbook.py times each case against its cookbook version, interleaved in one
process (issue 19: each case at most 1.02x the cookbook's time); tests/test_cookbook.py
checks at the tiny preset that the two compute the same thing.
"""
