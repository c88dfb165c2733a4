"""Decoding along a recording's plan: the non-learned plan prior (`plan_prior`), the plan's chain and its decoders
(`plan_decoder`), and the calibrated emissions they read (`emissions`); docs/decoding_emissions.md."""
