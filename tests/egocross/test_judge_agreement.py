"""The judge's agreement with the substring rule (data.judge_agreement=true, openqa.judge_agreement): only the replies
the rule scored correct go to the judge a second time, its marks change no score, and the count says how many it
also marked correct."""

from __future__ import annotations

import json

from spacewalk.benchmarks.egocross import openqa


def test_agreement_counts_the_judges_marks_on_what_the_rule_decided():
    cases = [("q1", "red cube", "a red cube on the table", json.dumps({"prediction": "the red cube"})),
             ("q2", "blue", "blue", json.dumps({"prediction": "green"})),  # the rule leaves it to the judge
             ("q3", "two", "two cones", json.dumps({"prediction": "two cones"})),
             ("q4", 3, "three", json.dumps({"prediction": "3"}))]
    asked = []

    def generate(prompts):
        asked.extend(prompts)
        return ['{"mark": 5}' if "q1" in p else '{"mark": 2}' if "q3" in p else "no mark" for p in prompts]

    judgements = openqa.judge_replies(cases, generate=lambda prompts: ['{"mark": 1}'] * len(prompts))
    assert [j.source for j in judgements] == ["substring", "judge: mark", "substring", "substring"]
    before = [j.score for j in judgements]
    agreement = openqa.judge_agreement(cases, judgements, generate, batch_size=2)
    assert agreement == {"cases": 3, "agree": 1, "percent": 100 / 3, "unreadable": 1}
    assert len(asked) == 3 and not any("q2" in p for p in asked)  # only what the rule decided
    assert [j.score for j in judgements] == before
