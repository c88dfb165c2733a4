"""spacewalk: the domain library, usable without Lightning and Hydra (docs/architecture.md).

Shared machinery at the top: `errors`, `fields` (validated JSON fields), `io` (atomic files), `video`
(decoding), `encoders` (frozen text and video encoders), `grid` (the k-second cell grid and which cells a
window covers), `modalities` (video, text or both), `durations` ("5min" -> 300.0). One subpackage per
benchmark: `spacewalk18` (with its feature bank and timeline pictures), `hirest`. The training layer, the only
place that knows Lightning or Hydra: `training`. Command-line tools: `python -m spacewalk.score`,
`spacewalk.spacewalk18.samples`, `spacewalk.download`.
"""

__version__ = "0.1.0"
