"""The synthetic HiREST's vocabulary: tasks, objects, actions; their looks and how people say them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

COLOURS = {  # name -> RGB in [0, 1]
    "red": (0.85, 0.15, 0.15), "orange": (0.95, 0.55, 0.10), "yellow": (0.95, 0.85, 0.15),
    "green": (0.20, 0.70, 0.25), "blue": (0.20, 0.40, 0.90), "purple": (0.55, 0.25, 0.80),
    "pink": (0.95, 0.50, 0.70), "brown": (0.50, 0.30, 0.15), "white": (0.95, 0.95, 0.95),
    "black": (0.10, 0.10, 0.12),
}
TASK_COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown")

# object -> (its shape on screen, what one does with it)
OBJECTS = {
    "paper": ("square", ("cut", "fold", "glue", "paint", "place")),
    "ribbon": ("band", ("cut", "fold", "glue", "place")),
    "clay": ("ellipse", ("roll", "cut", "paint", "place")), "card": ("tall", ("cut", "fold", "glue", "paint")),
    "beads": ("circles", ("place", "glue", "paint", "pour")), "paint": ("bowl", ("pour", "mix")),
    "dough": ("ellipse", ("roll", "cut", "mix", "place")), "batter": ("bowl", ("mix", "pour")),
    "fruit": ("circles", ("cut", "place", "mix")), "icing": ("band", ("mix", "pour", "place")),
    "cake": ("tall", ("cut", "place")), "wall": ("frame", ("paint", "roll")),
    "shelf": ("bars", ("place", "paint", "glue")), "tiles": ("grid", ("cut", "glue", "place")),
    "fabric": ("square", ("cut", "fold", "glue", "place")), "board": ("band", ("cut", "paint", "glue", "place")),
    "pot": ("triangle", ("paint", "place", "pour")), "salt": ("circles", ("pour", "mix")),
    "oil": ("bowl", ("pour", "mix")), "soap": ("square", ("cut", "pour", "place")),
    "wax": ("ellipse", ("pour", "mix", "cut")), "jar": ("tall", ("place", "pour")),
}

# action -> (its look, heading templates); "{col}" is the object's colour. Looks are coarse (they survive an
# 8 x 8 thumbnail) and move slowly (frames 1 s apart look alike)
ACTIONS = {
    "cut": ("stripes", ("cut the {col} {obj}", "cut the {obj} into pieces", "cut the {obj}")),
    "fold": ("fold", ("fold the {col} {obj}", "fold the {obj} in half", "fold the {obj}")),
    "glue": ("spot", ("glue the {col} {obj}", "apply glue to the {obj}", "glue the {obj} together")),
    "paint": ("gradient", ("paint the {obj} {col}", "paint the {col} {obj}", "add {col} paint to the {obj}")),
    "mix": ("radial", ("mix the {col} {obj}", "stir the {obj}", "mix the {obj} well")),
    "pour": ("stream", ("pour the {col} {obj}", "add the {obj}", "pour in the {obj}")),
    "roll": ("bands", ("roll the {col} {obj}", "roll out the {obj}", "roll the {obj} flat")),
    "place": ("shadow", ("place the {col} {obj}", "put the {obj} on top", "place the {obj} in the middle")),
}
ACTION_SAY = {  # spoken forms: what the narrator says while doing it
    "cut": ("cut the {obj}", "cut the {col} {obj}", "cut this into pieces", "cut along the line"),
    "fold": ("fold the {obj}", "fold it in half", "fold the {col} {obj} over"),
    "glue": ("glue the {obj}", "put some glue on the {obj}", "stick the {obj} down"),
    "paint": ("paint the {obj}", "paint it {col}", "give the {obj} a coat of {col} paint"),
    "mix": ("mix the {obj}", "stir the {col} {obj}", "mix everything together"),
    "pour": ("pour the {obj}", "pour in the {col} {obj}", "add the {obj}"),
    "roll": ("roll the {obj}", "roll out the {col} {obj}", "roll it flat"),
    "place": ("place the {obj}", "put the {col} {obj} on top", "set the {obj} in place"),
}

CATEGORIES = {  # category (as the release names them) -> things made: query, thing, main object, others
    "Hobbies and Crafts": (
        ("Make a {C} Paper Lantern", "paper lantern", "paper", ("ribbon", "paint")),
        ("Make a {C} Ribbon Bow", "ribbon bow", "ribbon", ("card", "beads")),
        ("Make a {C} Clay Pot", "clay pot", "clay", ("paint", "beads")),
        ("Make a {C} Greeting Card", "greeting card", "card", ("paper", "ribbon")),
        ("Make a {C} Bead Bracelet", "bead bracelet", "beads", ("ribbon", "card")),
        ("Make a {C} Paper Flower", "paper flower", "paper", ("card", "paint")),
    ),
    "Food and Entertaining": (
        ("Make a {C} Velvet Cake", "cake", "batter", ("cake", "icing")),
        ("Make {C} Fruit Tarts", "fruit tarts", "fruit", ("dough", "icing")),
        ("Make a {C} Smoothie", "smoothie", "fruit", ("batter", "icing")),
        ("Make {C} Sugar Cookies", "cookies", "dough", ("icing", "fruit")),
        ("Make {C} Pancakes", "pancakes", "batter", ("fruit", "dough")),
    ),
    "Home and Garden": (
        ("Paint a {C} Accent Wall", "accent wall", "wall", ("board", "tiles")),
        ("Build a {C} Bookshelf", "bookshelf", "shelf", ("board", "pot")),
        ("Tile a {C} Backsplash", "backsplash", "tiles", ("board", "wall")),
        ("Sew a {C} Pillow Cover", "pillow cover", "fabric", ("board", "tiles")),
        ("Build a {C} Planter Box", "planter box", "pot", ("board", "shelf")),
    ),
    "Personal Care and Style": (
        ("Make a {C} Bath Bomb", "bath bomb", "salt", ("oil", "jar")),
        ("Make {C} Lip Balm", "lip balm", "wax", ("oil", "jar")),
        ("Make a {C} Soap Bar", "soap bar", "soap", ("oil", "salt")),
        ("Make a {C} Sugar Scrub", "sugar scrub", "salt", ("oil", "jar")),
    ),
}
SURFACES = (  # the work surface a task is filmed on: colour, grain
    ((0.62, 0.45, 0.30), "grain"), ((0.90, 0.89, 0.86), "plain"), ((0.26, 0.28, 0.31), "plain"),
    ((0.22, 0.45, 0.32), "grid"), ((0.80, 0.80, 0.83), "veins"), ((0.35, 0.45, 0.62), "grain"),
)
RECIPE_LENGTH = 8


@dataclass(frozen=True)
class StepKind:
    action: str
    obj: str
    colour: str
    heading: str  # the task's wording for it


@dataclass(frozen=True)
class Task:
    query: str
    category: str
    thing: str
    colour: str
    surface: int
    recipe: tuple[StepKind, ...]


def _all_tasks() -> tuple[tuple[str, str, str, str, tuple[str, ...], str], ...]:
    out = []
    for category, things in CATEGORIES.items():
        for query, thing, main, others in things:
            for colour in TASK_COLOURS:
                text = query.format(C=colour.capitalize())
                out.append((re.sub(r"\ba (?=[AEIOU])", "an ", text), category, thing, main, others, colour))
    return tuple(out)


TASKS = _all_tasks()


def make_task(index: int, seed: int) -> Task:
    """A task's look and recipe. Tasks making the same thing share the recipe (RECIPE_LENGTH steps,
    neighbours always differ in action) and its wording; colours and work surface are the task's own."""
    query, category, thing, main, others, colour = TASKS[index]
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1, index]))
    free = [c for c in COLOURS if c != colour]
    colours = {main: colour, **{o: free[int(rng.integers(len(free)))] for o in others}}
    surface = int(rng.integers(len(SURFACES)))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1, len(TASKS) + index // len(TASK_COLOURS)]))
    objects = (main, *others)
    pairs = [(action, obj) for obj in objects for action in OBJECTS[obj][1]]
    recipe: list[StepKind] = []
    while len(recipe) < RECIPE_LENGTH:
        last = recipe[-1].action if recipe else ""
        options = [p for p in pairs if p[0] != last]
        fresh = [p for p in options if all((k.action, k.obj) != p for k in recipe)] or options
        main_first = [p for p in fresh if p[1] == main]
        action, obj = pick(rng, main_first if main_first and rng.random() < 0.5 else fresh)
        template = pick(rng, ACTIONS[action][1])
        recipe.append(StepKind(action, obj, colours[obj], template.format(col=colours[obj], obj=obj)))
    return Task(query, category, thing, colour, surface, tuple(recipe))


def pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return items[int(rng.integers(len(items)))]
