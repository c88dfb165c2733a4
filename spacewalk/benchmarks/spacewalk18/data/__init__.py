"""Spacewalk-18's data: the release layout read into typed, validated objects (`dataset`), the context windows
(`windows`), and the samplers that make the task files for any recordings (`step_sampler`, `retrieval_sampler`;
`python -m spacewalk.benchmarks.spacewalk18.data.samples` writes them)."""
