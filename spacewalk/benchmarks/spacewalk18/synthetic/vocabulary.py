"""The steps' vocabulary: concepts (actor, action, object, location) with written forms for captions and spoken
forms (as ASR writes them) for narration, and each concept's visual signature (a colour and a moving pattern)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTORS = {
    "EV1": (["EV one", "Eighty one", "the crew member in the red stripes"], "is"),
    "EV2": (["EV two", "the crew member in the plain white suit"], "is"),
    "EV1 & EV2": (["both crew members", "EV one and EV two", "the two spacewalkers"], "are"),
}
OBJECTS = {
    "old battery": ["old battery", "nickel hydrogen battery", "old nickel hydrogen battery"],
    "new battery": ["new battery", "lithium ion battery", "new lithium ion battery"],
    "adapter plate": ["adapter plate", "battery adapter plate"],
    "foot restraint": ["foot restraint", "portable foot restraint", "PFR"],
    "camera": ["camera", "HD camera", "external camera assembly"],
    "thermal cover": ["thermal cover", "insulation blanket", "thermal blanket"],
    "solar array bag": ["solar array bag", "strut bag", "bag with the array struts"],
    "power cable": ["power cable", "jumper cable", "power jumper"],
    "grapple fixture": ["grapple fixture", "grapple pin"],
    "tool bag": ["tool bag", "crew lock bag"],
    "handrail": ["handrail", "new handrail"],
    "mast canister strut": ["mast canister strut", "mid strut", "lower strut"],
    "pump module": ["pump module", "ammonia pump module"],
    "radiator": ["radiator", "radiator panel"],
    "upper triangle": ["upper triangle", "triangle frame"],
}
LOCATIONS = {
    "airlock": ["the airlock", "the Quest airlock"],
    "P6 truss": ["p six", "the port six truss", "the p six worksite"],
    "S4 truss": ["s four", "the starboard four truss"],
    "P1 truss": ["p one", "the port one truss"],
    "Z1 truss": ["z one", "the zenith one truss"],
    "external pallet": ["the external pallet", "the EP"],
    "Columbus module": ["Columbus", "the European Columbus module"],
    "Canadarm2": ["the Canada arm two", "the robotic arm"],
}
VERB_ING = {
    "exit": "exiting", "move": "moving", "remove": "removing", "install": "installing", "stow": "stowing",
    "set up": "setting up", "retrieve": "retrieving", "replace": "replacing", "route": "routing",
    "connect": "connecting", "inspect": "inspecting", "build": "building", "photograph": "photographing",
    "release": "releasing", "return": "returning", "torque": "torquing",
}


@dataclass(frozen=True)
class Concept:
    actor: str
    verb: str
    obj: str  # "" for moves
    prep: str
    loc: str

    @property
    def caption(self) -> str:
        return " ".join(p for p in (self.actor, self.verb, self.obj, self.prep, self.loc) if p)


# Objects, locations and verbs are shared between concepts, so only their combination names a step.
VOCABULARY = tuple(Concept(*c) for c in (
    ("EV1 & EV2", "exit", "", "", "airlock"),
    ("EV1", "move", "", "to", "P6 truss"),
    ("EV2", "move", "", "to", "S4 truss"),
    ("EV1", "remove", "old battery", "from", "P6 truss"),
    ("EV2", "install", "new battery", "on", "P6 truss"),
    ("EV1", "stow", "old battery", "on", "external pallet"),
    ("EV2", "install", "adapter plate", "on", "S4 truss"),
    ("EV1", "set up", "foot restraint", "on", "Canadarm2"),
    ("EV2", "retrieve", "foot restraint", "from", "airlock"),
    ("EV1", "replace", "camera", "on", "Columbus module"),
    ("EV2", "remove", "thermal cover", "from", "Columbus module"),
    ("EV1 & EV2", "install", "solar array bag", "on", "P6 truss"),
    ("EV1", "route", "power cable", "to", "S4 truss"),
    ("EV2", "connect", "power cable", "on", "Z1 truss"),
    ("EV1", "inspect", "grapple fixture", "on", "Canadarm2"),
    ("EV2", "install", "mast canister strut", "on", "P6 truss"),
    ("EV1 & EV2", "build", "upper triangle", "at", "P6 truss"),
    ("EV2", "install", "handrail", "on", "Z1 truss"),
    ("EV1", "remove", "pump module", "from", "S4 truss"),
    ("EV2", "stow", "tool bag", "in", "airlock"),
    ("EV1", "install", "thermal cover", "on", "external pallet"),
    ("EV2", "photograph", "radiator", "on", "P1 truss"),
    ("EV1", "release", "grapple fixture", "from", "Canadarm2"),
    ("EV1 & EV2", "return", "", "to", "airlock"),
))

# Visual signature of concept i: PALETTE[i % 8] x PATTERNS[i % 6]; lcm(8, 6) = 24 keeps all 24 distinct
# while any single cue (colour or pattern) is shared with other concepts.
PALETTE = np.array([
    (0.90, 0.20, 0.20), (0.95, 0.55, 0.10), (0.90, 0.85, 0.20), (0.20, 0.80, 0.30),
    (0.15, 0.75, 0.75), (0.30, 0.50, 0.95), (0.60, 0.30, 0.90), (0.95, 0.40, 0.75),
], dtype=np.float32)
PATTERNS = ("stripes", "checker", "rings", "disc", "dots", "waves")
