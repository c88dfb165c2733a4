"""What a run reads of each window: `modalities` is "text", "video" or "video+text" in the configs
(`modalities=video+text`), parsed once into a `Modalities` value that the DataModules, models and benchmarks
ask `.video` / `.text` of."""

from __future__ import annotations

from dataclasses import dataclass

from spacewalk.core.errors import ConfigError

NAMES = ("video", "text", "video+text")


@dataclass(frozen=True)
class Modalities:
    video: bool
    text: bool

    def __post_init__(self):
        if not (self.video or self.text):
            raise ConfigError("modalities need video, text or both")

    @classmethod
    def parse(cls, value: str | Modalities) -> Modalities:
        """"video" | "text" | "video+text" (or a Modalities, returned as it is); anything else is an error
        naming the value and the allowed ones."""
        if isinstance(value, Modalities):
            return value
        if value not in NAMES:
            raise ConfigError(f"modalities must be one of {NAMES}, got {value!r}")
        return cls(video="video" in value, text="text" in value)

    @property
    def only_video(self) -> bool:
        return self.video and not self.text

    @property
    def only_text(self) -> bool:
        return self.text and not self.video

    def __str__(self) -> str:
        """The config's spelling, for messages and metrics files."""
        return "video+text" if self.video and self.text else "video" if self.video else "text"
