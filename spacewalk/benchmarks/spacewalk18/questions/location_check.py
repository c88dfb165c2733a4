"""A check of mc_plan's location rules on the train recordings only, where no location question exists.

No val or train recording has a step-location annotation, so the location rules cannot be chosen on val; this
module checks them on proxy questions instead, made from each train recording the way place_knowledge.py reads
where steps happen: a transcript sentence naming the place puts the step annotated at its middle "at" the place.
For each train recording and each place it names (the places of a question file's location questions, read from
the question texts alone), a one-hour clip around the mentions gives
- "while at": a step under a mention in the clip, against three steps of the clip done wholly before the first or
  after the last mention;
- "before" ("after"): a step of the clip done wholly before the first (after the last) mention, against three
  steps under a mention or on the other side.
Every answer follows from the mentions, so a rule that reads the clip's mentions is flattered ("mentions" and the
in-clip share of "order_and_association"); the options' order and the train association are not. The place
knowledge answering a recording's questions is rebuilt without that recording (leave one train recording out);
the chain's emissions are fitted on all train recordings, alike for both rules.

`association_auc` checks the association alone: for each held-out train recording and place it names, how well
each scorer (the lift, a caption naming the place, their sum) ranks the recording's steps under a mention above
its other steps (the area under the ROC curve), mean over (recording, place).

python -m spacewalk.benchmarks.spacewalk18.questions.location_check --root R
--questions R/tasks/question_answering/test.json --bank-dir BANK [--out check.json]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording
from spacewalk.benchmarks.spacewalk18.features import lexical
from spacewalk.benchmarks.spacewalk18.questions.place_knowledge import PlaceKnowledge, mention_times, steps_named_at
from spacewalk.benchmarks.spacewalk18.questions.plan_reading import LOCATION, LOCATION_RE, PlanReading, ReadingSettings
from spacewalk.core.errors import DataError
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual

CLIP_SECONDS = 3600.0  # the test file's clips are an hour long
WORDING = {"before": "before the astronaut arrives at", "at": "while the astronaut is at",
           "after": "after the astronaut leaves from"}
PER_RELATION = 3  # proxy questions per relation, clip and place at most


def places_in(questions: Sequence[str]) -> list[str]:
    """The places the location questions among these question texts ask about, sorted."""
    return sorted({m.group(2) for q in questions if (m := LOCATION_RE.match(q))})


def held_out_knowledge(recordings: Sequence[Recording], rarity: lexical.Rarity) -> dict[str, PlaceKnowledge]:
    """For each recording, the place knowledge of the others (leave one recording out)."""
    return {r.video_id: PlaceKnowledge([o for o in recordings if o.video_id != r.video_id], rarity)
            for r in recordings}


def proxy_questions(recording: Recording, place: str, rng: np.random.Generator) -> list[MultipleChoiceItem]:
    """Proxy location questions of one recording about one place (the module's docstring): two clips (one if
    they coincide), one starting a quarter of an hour before the first mention and one centred on the middle
    mention, each kept inside the recording; `meta["relation"]` says which of before / at / after each asks."""
    variants = lexical.place_variants(place)
    times = mention_times(recording, variants) if variants else []
    if not times:
        return []
    items = []
    centres = (times[0] + CLIP_SECONDS / 4, times[len(times) // 2])
    for start in sorted({max(0.0, min(c - CLIP_SECONDS / 2, recording.duration - CLIP_SECONDS)) for c in centres}):
        end = min(recording.duration, start + CLIP_SECONDS)
        inside = [t for t in times if start <= t < end]
        if not inside:
            continue
        at = {recording.label_at_time(t) for t in inside} - {-1, 0}
        spans = defaultdict(list)
        for seg in recording.segments:
            if seg.label > 0 and seg.end > start and seg.start < end:
                spans[seg.label].append((max(seg.start, start), min(seg.end, end)))
        before = {k for k, s in spans.items() if k not in at and max(e for _, e in s) < min(inside)}
        after = {k for k, s in spans.items() if k not in at and min(b for b, _ in s) > max(inside)}
        for relation, right, wrong in (("at", at, before | after), ("before", before, at | after),
                                       ("after", after, before | at)):
            right, wrong = sorted(right), sorted(wrong)
            if len(wrong) < 3:
                continue
            for j in range(min(PER_RELATION, len(right))):
                steps = [int(rng.choice(right)), *(int(x) for x in rng.choice(wrong, 3, replace=False))]
                order = rng.permutation(4)
                captions = tuple(recording.steps[steps[i]].caption for i in order)
                if len({" ".join(c.split()).casefold() for c in captions}) < 4:
                    continue  # two steps with one caption: no single answer
                items.append(MultipleChoiceItem(
                    id=f"{recording.video_id}/{place}/{int(start)}/{relation}/{j}",
                    question=f"Which of the following tasks happens {WORDING[relation]} {place}?", options=captions,
                    answer=int(np.flatnonzero(order == 0)[0]),
                    visual=Visual(video=recording.video_path, start=start, end=end),
                    meta={"type": LOCATION, "video_id": recording.video_id, "relation": relation}))
    return items


def association_auc(recordings: Sequence[Recording], places: Sequence[str], rarity: lexical.Rarity) -> dict:
    """Mean area under the ROC curve of each association scorer on held-out train recordings (the module's
    docstring), and how many (recording, place) pairs it is the mean over."""
    from sklearn.metrics import roc_auc_score

    held_out = held_out_knowledge(recordings, rarity)
    aucs = defaultdict(list)
    for place in places:
        variants = lexical.place_variants(place)
        for r in recordings:
            under = set(steps_named_at(r, variants)) if variants else set()
            label = np.array([s.index in under for s in r.steps[1:]])
            if label.all() or not label.any():
                continue
            captions = [s.caption for s in r.steps[1:]]
            knowledge = held_out[r.video_id]
            lift = knowledge.association(place, captions)
            affinity = knowledge.affinity(place, captions)
            for name, score in (("lift", lift), ("names the place", affinity - lift), ("affinity", affinity)):
                aucs[name].append(roc_auc_score(label, score))
    if not aucs:
        raise DataError(f"no train recording names any of the places {list(places)} under an annotated step")
    return {name: float(np.mean(v)) for name, v in aucs.items()} | {"pairs": len(aucs["lift"])}


def rule_accuracy(reader: PlanReading, items: Sequence[MultipleChoiceItem], settings: ReadingSettings) -> dict:
    """Accuracy in percent per relation and overall, and the counts; each question's place knowledge leaves its
    own recording out."""
    held_out = held_out_knowledge(reader.dataset.split("train"), reader.rarity)
    correct = defaultdict(list)
    for item in items:
        reader.place_knowledge = held_out[item.meta["video_id"]]
        scores, _ = reader.scores(item, settings)
        right = int(np.argmax(scores)) == item.answer
        correct[item.meta["relation"]].append(right)
        correct["all"].append(right)
    reader.place_knowledge = None
    return {k: {"accuracy": 100 * float(np.mean(v)), "count": len(v)} for k, v in correct.items()}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from spacewalk.core.arguments import existing_file, output_file
    from spacewalk.core.command_errors import user_errors_reported
    from spacewalk.core.io import write_json
    from spacewalk.encoders.sentence import minilm_text_encoder

    parser = argparse.ArgumentParser(prog="python -m spacewalk.benchmarks.spacewalk18.questions.location_check",
                                     description="Check mc_plan's location rules on proxy questions of the train "
                                                 "recordings (the module's docstring).")
    parser.add_argument("--root", required=True, type=Path, help="the Spacewalk-18 release")
    parser.add_argument("--questions", required=True, type=existing_file,
                        help="a question file whose location questions name the places (only their texts are used)")
    parser.add_argument("--bank-dir", type=Path, default=Path("data/feature_banks/spacewalk18/minilm"))
    parser.add_argument("--seed", type=int, default=0, help="the proxy questions' draw")
    parser.add_argument("--out", type=output_file, default=None, help="JSON file for the results")
    args = parser.parse_args(argv)
    with user_errors_reported():
        # the options-only word-channel reading of docs/results.md
        base = {"pool": 2, "emission_weight": 0.3, "rate_scale": 0.5, "lexical": True}
        reader = PlanReading(minilm_text_encoder(device="cpu"), root=args.root, bank_dir=args.bank_dir,
                             steps="options", **base)
        places = places_in([q.question for q in reader.dataset.questions(args.questions)])
        if not places:
            raise DataError("holds no location question to take the places from", file=args.questions)
        train = reader.dataset.split("train")
        rng = np.random.default_rng(args.seed)
        items = [i for r in train for place in places for i in proxy_questions(r, place, rng)]
        result = {"places": places, "association_auc": association_auc(train, places, reader.rarity), "rules": {
            rule: rule_accuracy(reader, items, ReadingSettings(**base, location_rule=rule))
            for rule in ("mentions", "order_and_association")}}
        print(json.dumps(result, indent=1))
        if args.out is not None:
            write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
