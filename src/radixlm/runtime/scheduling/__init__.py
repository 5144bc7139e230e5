"""Scheduling: admission, batching, retraction, constraints, and what a step's outputs become."""
