"""Regenerate the "official" HiREST numbers pinned in tests/hirest/test_hirest_metrics.py with the authors' own code.

    git clone https://github.com/j-min/HiREST /path/to/HiREST        # the authors' repository (never fetched here)
    python measurements/hirest_official_constants.py --authors-repo /path/to/HiREST [--data ../shared/data/hirest]

Moment segmentation (`OFFICIAL_SEGMENTATION_GT`): the ground-truth steps given back as predictions, scored by the
authors' `evaluate.py --task moment_segmentation --preprocess_moment_bounds` on the val and test step GT, run
inside their checkout (it reads ./data/evaluation/categories.json from there). Its module imports
`language_evaluation` (used by captioning only): when that package is absent, an empty stand-in is put on the
path for this run, which the segmentation code never touches. The numbers depend on numpy's argsort of a
constant key in their NMS: numpy 1.x gives the test's "introsort" entries, numpy 2.x on an AVX-512 CPU the
"identity" ones (docs/hirest.md, Official scoring rules); the numpy version in use is printed with them.

Step captioning (the CIDEr of the val GT captions against themselves): the authors' evaluate.py computes the
COCO metrics with `language_evaluation.CocoEvaluator().run_evaluation(candidates, references)` (package
github.com/bckim92/language-evaluation); its captioning entry point also loads an AllenNLP entailment model
and CLIP, so this script calls that COCO evaluator alone, on the candidates and references the authors'
loop builds (lower-cased sentences). It runs only when `language_evaluation` is installed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

STEP_GT = {"val": "data/val_testing/formated_moment_evaluation_gt.json",
           "test": "data/evaluation/formatted_moment_evaluation_gt.json"}


def segmentation(authors: Path, data: Path, split: str, scratch: Path) -> dict:
    gt_file = data / STEP_GT[split]
    gt = json.loads(gt_file.read_text())
    predictions = scratch / f"gt_as_predictions_{split}.json"
    predictions.write_text(json.dumps({video: {"bounds": entry["bounds"]} for video, entry in gt.items()}))
    env = dict(os.environ)
    if find_spec("language_evaluation") is None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(scratch / "stand_in"), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "evaluate.py", "--task", "moment_segmentation", "--preprocess_moment_bounds",
         "--pred_data", str(predictions.resolve()), "--gt_data", str(gt_file.resolve())],
        cwd=authors, capture_output=True, text=True, check=True, env=env)
    # evaluate.py prints its arguments, then result["all"] as a Python dict on the last line
    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


def captioning_cider(data: Path) -> float | None:
    if find_spec("language_evaluation") is None:
        return None
    import language_evaluation

    gt = json.loads((data / STEP_GT["val"]).read_text())
    refs = [c["sentence"].lower() for entry in gt.values() for c in entry["captions"]]
    return language_evaluation.CocoEvaluator().run_evaluation(refs, refs)["CIDEr"] * 100


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--authors-repo", type=Path, required=True, help="a checkout of github.com/j-min/HiREST")
    parser.add_argument("--data", type=Path, default=Path("../shared/data/hirest"),
                        help="the folder holding HiREST's data/ (default: ../shared/data/hirest)")
    args = parser.parse_args(argv)
    if not (args.authors_repo / "evaluate.py").is_file():
        parser.error(f"{args.authors_repo} holds no evaluate.py: pass a checkout of github.com/j-min/HiREST")
    import numpy

    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        (scratch / "stand_in").mkdir()
        (scratch / "stand_in" / "language_evaluation.py").write_text("")  # never used by segmentation
        order = "introsort" if int(numpy.__version__.split(".")[0]) < 2 else "identity (on an AVX-512 CPU)"
        print(f"numpy {numpy.__version__}: OFFICIAL_SEGMENTATION_GT[split, {order!r}]")
        for split in STEP_GT:
            print(f"  {split}: {segmentation(args.authors_repo, args.data, split, scratch)}")
    cider = captioning_cider(args.data)
    print(f"val GT captions against themselves, CIDEr: {cider!r}" if cider is not None else
          "CIDEr: needs `language_evaluation` (github.com/bckim92/language-evaluation), as the authors' evaluate.py")


if __name__ == "__main__":
    main()
