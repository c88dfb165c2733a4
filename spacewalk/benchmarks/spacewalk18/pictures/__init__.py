"""Pictures of a run: a recording's predictions as a timeline (`timeline`), an intra-video retrieval test's missed
samples (`retrieval_plot`)."""
