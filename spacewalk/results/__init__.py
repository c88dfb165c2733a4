"""The results layer: what a finished run directory holds and the tools that read it (tables, paired comparisons,
power). No Lightning, no Hydra; the benchmarks are found through spacewalk.benchmarks.registry."""
