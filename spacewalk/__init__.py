"""spacewalk: the domain library (formats, samplers, windows, decoding, metrics), usable without Lightning."""

__version__ = "0.1.0"
