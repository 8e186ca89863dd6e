"""The optimiser's parts: optimisers (Adam, SGD with momentum), the flat parameter layout,
learning-rate schedules and the journal that makes a stopped training resume with the same
numbers. The training loop itself is the optimize job, `simrun.jobs.optimize`."""
