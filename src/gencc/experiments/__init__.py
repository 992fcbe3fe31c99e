"""Experiments built on the library and the runtime: comparisons, sweeps, the demo."""
