"""spacewalk/algorithms/hmm.py against enumerating every state path of small models."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from spacewalk.algorithms.hmm import forward_backward, viterbi


def random_model(rng, s: int, t: int, m: int = 2):
    matrices = rng.random((m, s, s)) ** 3  # uneven, with small entries
    matrices[0, 0, 1] = 0.0  # an impossible transition
    matrices /= matrices.sum(axis=2, keepdims=True)
    index = rng.integers(0, m, t - 1)
    initial = rng.random(s)
    initial /= initial.sum()
    log_emissions = rng.normal(scale=2.0, size=(t, s))
    return log_emissions, matrices, index, initial


def enumerate_paths(log_emissions, matrices, index, initial):
    t, s = log_emissions.shape
    paths = np.array(list(itertools.product(range(s), repeat=t)))
    weight = initial[paths[:, 0]] * np.exp(log_emissions[0, paths[:, 0]])
    for i in range(1, t):
        weight = weight * matrices[index[i - 1], paths[:, i - 1], paths[:, i]] * np.exp(log_emissions[i, paths[:, i]])
    return paths, weight


@pytest.mark.parametrize("matrices", [2, 1])  # one matrix: the regular grid's shortcut
@pytest.mark.parametrize("seed", range(6))
def test_posteriors_likelihood_and_best_path_equal_brute_force(seed, matrices):
    rng = np.random.default_rng(seed)
    s, t = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    model = random_model(rng, s, t, matrices)
    paths, weight = enumerate_paths(*model)
    expected = np.stack([[weight[paths[:, i] == k].sum() for k in range(s)] for i in range(t)]) / weight.sum()
    posterior, loglik = forward_backward(*model)
    np.testing.assert_allclose(posterior[0], expected, atol=1e-12)
    assert loglik[0] == pytest.approx(np.log(weight.sum()), rel=1e-12)
    np.testing.assert_array_equal(viterbi(*model)[0], paths[weight.argmax()])


def test_a_batch_decodes_each_sequence_as_alone():
    rng = np.random.default_rng(7)
    models = [random_model(rng, 3, 5) for _ in range(4)]
    _, matrices, _, initial = models[0]
    emissions = np.stack([m[0] for m in models])
    index = np.stack([m[2] for m in models])
    posterior, loglik = forward_backward(emissions, matrices, index, initial)
    path = viterbi(emissions, matrices, index, initial)
    for n, (e, _, i, _) in enumerate(models):
        alone = forward_backward(e, matrices, i, initial)
        np.testing.assert_allclose(posterior[n], alone[0][0], atol=1e-12)
        assert loglik[n] == pytest.approx(alone[1][0])
        np.testing.assert_array_equal(path[n], viterbi(e, matrices, i, initial)[0])


def test_long_sequences_stay_finite():
    rng = np.random.default_rng(0)
    e, matrices, _, initial = random_model(rng, 4, 2)
    emissions = rng.normal(scale=30.0, size=(3000, 4))
    posterior, loglik = forward_backward(emissions, matrices, np.zeros(2999, int), initial)
    assert np.isfinite(posterior).all() and np.isfinite(loglik).all()
    np.testing.assert_allclose(posterior.sum(axis=2), 1.0)


def test_shapes_are_checked():
    rng = np.random.default_rng(0)
    e, matrices, index, initial = random_model(rng, 3, 4)
    with pytest.raises(ValueError, match="index"):
        forward_backward(e, matrices, index[:-1], initial)
    with pytest.raises(ValueError, match="matrices"):
        viterbi(e, matrices[:, :2], index, initial)
