"""Do the paired tests keep their promise at the benchmarks' sizes? False positives at 0.05 and the 95 % interval's
coverage, by simulation, for the old rule (the two-stage paired bootstrap) and the new ones
(spacewalk/results/statistics.py). No assertions: numbers to read (docs/results.md quotes them).

    python measurements/paired_test_calibration.py [--pairs 2000] [--spread 2.5] [--spread-from RUN_A RUN_B]
        [--tables recordings,these,recipes,questions] [--seed-sd 0.5]

Each cell simulates `--pairs` pairs of runs with Spacewalk-18's structure: G recordings of `--samples` samples;
recording g has a true difference delta_g = delta + tau z_g (tau: the between-recording spread of a difference,
`--spread` points, or measured on two real runs' per-recording Accuracy with `--spread-from`); each sample is
scored differently by the two runs with probability `--disagreement`, B's way more often by delta_g / 2 (so a
recording's observed difference carries the within-recording sampling noise of an accuracy). Null pairs have
delta = 0 (false positives: p <= 0.05); shifted pairs have delta = `--shift` (coverage: the interval holds delta).

Printed, one table per claim (statistics.py's module docstring says which is which):
- *new recordings* (these runs; G recordings): the old rule (recordings drawn with replacement, then the samples
  within them, 1000 resamples, the same for both runs; percentile interval; centred two-sided p), against the
  exact sign-flip test over recordings and Student's t interval (G - 1 df);
- *these recordings*: the recordings kept, only the samples drawn again (the true value: the mean of these
  recordings' delta_g); the paired bootstrap stratified by recording, whose units are the 2000 samples of each;
- *recipes*: three seeds a side, each run adding its own shift (sd `--seed-sd`) and a per-recording one (sd
  `--seed-recording-sd`); the old rule (the seeds' mean on the bootstrap over recordings) against the
  Welch-Satterthwaite t of statistics.recipes_difference, and the sign-flip test on the seeds' means, which
  answers the runs' claim, not the recipes';
- *questions* (flat units: Spacewalk-18 QA has 376, its types 27 to 120): the flat paired bootstrap against
  compare's rule for a mean over flat units (the sign-flip test and t over the per-question differences).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from spacewalk.results.layout import read_metrics
from spacewalk.results.statistics import recipes_difference, sign_flip_test, t_interval

LEVEL = 0.95
ALPHA = 0.05


def percentile(replicates: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(replicates, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(low), float(high)


def centred_p(replicates: np.ndarray, observed: float) -> float:
    """The old rule's p (spacewalk.results.compare before the sign-flip test): two-sided, centred differences."""
    extreme = np.abs(replicates - observed) >= abs(observed) - 1e-12 * max(1.0, abs(observed))
    return float((1 + extreme.sum()) / (1 + len(replicates)))


class Recordings:
    """One pair of runs: each recording's counts of samples B got right and A wrong (+), the reverse (-), alike."""

    def __init__(self, rng: np.random.Generator, deltas: np.ndarray, n: int, disagreement: float):
        q = disagreement / 2
        plus = np.clip(q + deltas / 200, 0, disagreement)
        probabilities = np.stack([plus, disagreement - plus, 1 - np.full_like(plus, disagreement)], axis=-1)
        self.counts = rng.multinomial(n, probabilities)  # [G, 3]
        self.n = n

    @property
    def differences(self) -> np.ndarray:  # per recording, points
        return (self.counts[:, 0] - self.counts[:, 1]) / self.n * 100

    def resampled(self, rng: np.random.Generator, drawn: np.ndarray) -> np.ndarray:
        """Each drawn recording's samples drawn again: [B, G'] resampled differences (points)."""
        counts = rng.multinomial(self.n, self.counts[drawn] / self.n)
        return (counts[..., 0] - counts[..., 1]) / self.n * 100


def recordings_claim(rng, g: int, args, shift: float) -> tuple[float, float, tuple, tuple]:
    deltas = shift + args.spread * rng.standard_normal(g)
    pair = Recordings(rng, deltas, args.samples, args.disagreement)
    d = pair.differences
    observed = float(d.mean())
    drawn = rng.integers(0, g, size=(args.resamples, g))
    replicates = pair.resampled(rng, drawn).mean(axis=1)
    new = t_interval(d, LEVEL)
    return (centred_p(replicates, observed), sign_flip_test(d, seed=int(rng.integers(1 << 31))).p,
            percentile(replicates), (new.low, new.high))


def these_recordings_claim(rng, g: int, args, shift: float) -> tuple[float, tuple, float]:
    z = args.spread * rng.standard_normal(g)
    deltas = shift + z - z.mean()  # the truth of this claim: these recordings' mean delta_g, = shift
    pair = Recordings(rng, deltas, args.samples, args.disagreement)
    replicates = pair.resampled(rng, np.tile(np.arange(g), (args.resamples, 1))).mean(axis=1)
    return centred_p(replicates, float(pair.differences.mean())), percentile(replicates), float(deltas.mean())


def recipes_claim(rng, g: int, args, shift: float, seeds: int = 3) -> tuple:
    """[S, G] per-recording values of each side: a recipe's per-recording part, each seed's shift and its
    per-recording part, and the samples' noise (the within-recording sd of an accuracy difference)."""
    within = math.sqrt(args.disagreement) / math.sqrt(args.samples) * 100 / math.sqrt(2)

    def side(recipe: np.ndarray) -> np.ndarray:
        return (recipe + args.seed_sd * rng.standard_normal((seeds, 1))
                + math.hypot(args.seed_recording_sd, within) * rng.standard_normal((seeds, g)))

    interaction = args.spread * rng.standard_normal(g) / math.sqrt(2)
    a, b = side(-interaction / 2), side(shift + interaction / 2)
    d = b.mean(axis=0) - a.mean(axis=0)
    drawn = rng.integers(0, g, size=(args.resamples, g))
    replicates = d[drawn].mean(axis=1)
    new = recipes_difference(a, b, LEVEL)
    return (centred_p(replicates, float(d.mean())), new.p, sign_flip_test(d, seed=int(rng.integers(1 << 31))).p,
            percentile(replicates), (new.low, new.high))


def questions_claim(rng, n: int, args, shift: float) -> tuple[float, float, tuple, tuple]:
    """The paired bootstrap over n questions (old) against the sign-flip test and Student's t over the per-question
    differences (new: compare's rule for a mean over flat units)."""
    pair = Recordings(rng, np.array([shift]), n, args.disagreement)
    replicates = pair.resampled(rng, np.zeros((args.resamples, 1), dtype=np.int64))[:, 0]
    plus, minus, _ = pair.counts[0]
    d = np.concatenate([np.full(plus, 100.0), np.full(minus, -100.0), np.zeros(n - plus - minus)])
    new = t_interval(d, LEVEL)
    return (centred_p(replicates, float(pair.differences[0])), sign_flip_test(d, seed=int(rng.integers(1 << 31))).p,
            percentile(replicates), (new.low, new.high))


def rate(flags: list[bool]) -> str:
    return f"{100 * np.mean(flags):5.1f}%"


def covers(interval: tuple, truth: float) -> bool:
    low, high = interval
    return low is not None and low <= truth <= high


def spread_from(runs: list[Path]) -> float:
    """The standard deviation over recordings of the per-recording Accuracy difference of two real runs."""
    values = [read_metrics(run)["per_video"] for run in runs]
    videos = sorted(set(values[0]) & set(values[1]))
    d = [values[1][v]["Accuracy"] - values[0][v]["Accuracy"] for v in videos]
    return float(np.std(d, ddof=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2000, help="simulated pairs per cell (default 2000)")
    parser.add_argument("--resamples", type=int, default=1000, help="the old rule's bootstrap resamples")
    parser.add_argument("--recordings", default="2,3,6,10,20,50", help="the values of G")
    parser.add_argument("--samples", type=int, default=2000, help="samples per recording (Spacewalk-18: ~2000)")
    parser.add_argument("--spread", type=float, default=2.5, help="tau, the between-recording sd of a difference "
                        "(points)")
    parser.add_argument("--spread-from", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"),
                        help="measure tau on two real step-recognition runs (their per-recording Accuracy)")
    parser.add_argument("--disagreement", type=float, default=0.16, help="share of samples the two runs score "
                        "differently")
    parser.add_argument("--shift", type=float, default=2.0, help="the shifted pairs' true difference (points)")
    parser.add_argument("--seed-sd", type=float, default=0.5, help="recipes: sd of a seed's shift (points)")
    parser.add_argument("--seed-recording-sd", type=float, default=0.5,
                        help="recipes: sd of a seed's per-recording part (points)")
    parser.add_argument("--questions", default="27,57,120,376,2000", help="the flat case's numbers of units")
    parser.add_argument("--tables", default="recordings,these,recipes,questions", help="which tables to print")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tables = set(args.tables.split(","))
    sys.stdout.reconfigure(line_buffering=True)  # each row as it is done: the whole takes minutes
    if args.spread_from:
        args.spread = spread_from(args.spread_from)
    rng = np.random.default_rng(args.seed)
    recordings = [int(x) for x in args.recordings.split(",")]
    mc = 100 * math.sqrt(ALPHA * (1 - ALPHA) / args.pairs)
    start = time.perf_counter()
    print(f"{args.pairs} pairs per cell (Monte Carlo error of a 5 % rate: +-{mc:.2f} points, one s.e.); tau "
          f"{args.spread:.2f} points between recordings; {args.samples} samples per recording, "
          f"{100 * args.disagreement:.0f} % scored differently; shifted pairs {args.shift:+.1f} points; old rule "
          f"{args.resamples} bootstrap resamples")

    print("\nnew recordings (these runs): false positives at 0.05 (null pairs); 95 % coverage (shifted pairs)")
    print("   G  old FPR  new FPR  old cover  new cover  (old: two-stage bootstrap; new: sign flips, t with G-1 df)")
    for g in recordings if "recordings" in tables else ():
        null = [recordings_claim(rng, g, args, 0.0) for _ in range(args.pairs)]
        shifted = [recordings_claim(rng, g, args, args.shift) for _ in range(args.pairs)]
        print(f"{g:4d}  {rate([p <= ALPHA for p, *_ in null])}   {rate([p <= ALPHA for _, p, *_ in null])}   "
              f"{rate([covers(c, args.shift) for *_, c, _ in shifted])}     "
              f"{rate([covers(c, args.shift) for *_, c in shifted])}")

    print("\nthese recordings (these runs, new samples of the same recordings): the paired bootstrap stratified by "
          "recording")
    print("   G      FPR   cover")
    for g in recordings if "these" in tables else ():
        null = [these_recordings_claim(rng, g, args, 0.0) for _ in range(args.pairs)]
        shifted = [these_recordings_claim(rng, g, args, args.shift) for _ in range(args.pairs)]
        print(f"{g:4d}   {rate([p <= ALPHA for p, _, _ in null])}  {rate([covers(c, t) for _, c, t in shifted])}")

    print(f"\nrecipes (3 seeds a side; a seed's shift sd {args.seed_sd}, its per-recording part sd "
          f"{args.seed_recording_sd} points)")
    print("   G  old FPR  new FPR  sign-flip FPR  old cover  new cover  (new: Welch-Satterthwaite t over recordings "
          "and seeds)")
    for g in recordings if "recipes" in tables else ():
        null = [recipes_claim(rng, g, args, 0.0) for _ in range(args.pairs)]
        shifted = [recipes_claim(rng, g, args, args.shift) for _ in range(args.pairs)]
        print(f"{g:4d}  {rate([r[0] <= ALPHA for r in null])}   {rate([r[1] <= ALPHA for r in null])}   "
              f"{rate([r[2] <= ALPHA for r in null])}         {rate([covers(r[3], args.shift) for r in shifted])}"
              f"     {rate([covers(r[4], args.shift) for r in shifted])}")

    print("\nquestions (flat units; old: the paired bootstrap, percentile interval, centred p; new: sign flips and "
          "t over the per-question differences)")
    print("   n  old FPR  new FPR  old cover  new cover")
    for n in (int(x) for x in args.questions.split(",")) if "questions" in tables else ():
        null = [questions_claim(rng, n, args, 0.0) for _ in range(args.pairs)]
        shifted = [questions_claim(rng, n, args, args.shift) for _ in range(args.pairs)]
        print(f"{n:4d}   {rate([r[0] <= ALPHA for r in null])}   {rate([r[1] <= ALPHA for r in null])}   "
              f"{rate([covers(r[2], args.shift) for r in shifted])}     "
              f"{rate([covers(r[3], args.shift) for r in shifted])}")
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
