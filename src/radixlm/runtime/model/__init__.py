"""Model execution: config, weight loading, models, forward batches, the runner and the sampler."""
