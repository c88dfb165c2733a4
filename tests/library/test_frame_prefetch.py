"""Decoding ahead (spacewalk/media/frame_prefetch.py): batches in order whatever the decoders, bounded memory,
a decoder's error raised in the caller naming the file, and no decoder thread left behind."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.media.frame_prefetch import DecodeAhead

PATH = "/videos/rec.mp4"


class CountingReader:
    """A reader whose frame at t is a 1x1 pixel of value round(t); counts the frames it decoded."""

    def __init__(self, log: list, fail_at: float | None = None, error: type[Exception] = DataError):
        self.log, self.fail_at, self.error = log, fail_at, error
        self.closed = False

    def frames_at(self, timestamps):
        t = np.asarray(timestamps, dtype=np.float64)
        if self.fail_at is not None and (t >= self.fail_at).any():
            raise (self.error("cannot decode", file=PATH) if self.error is DataError else self.error("boom"))
        self.log.extend(t.tolist())
        return np.rint(t).astype(np.uint8).reshape(-1, 1, 1, 1)

    def close(self):
        self.closed = True


def decoder_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("decoder-")]


REQUESTS = [np.arange(10 * i, 10 * i + 10, dtype=np.float64) for i in range(9)]


@pytest.mark.parametrize(("decoders", "ahead", "piece"), [(1, 0, 64), (1, 1, 64), (1, 2, 3), (3, 1, 4), (4, 2, 64)])
def test_batches_come_in_order_and_equal_the_serial_ones(decoders, ahead, piece):
    readers = []

    def open_reader():
        readers.append(CountingReader([]))
        return readers[-1]

    first = CountingReader([])
    with DecodeAhead(REQUESTS, open_reader, path=PATH, decoders=decoders, ahead=ahead, reader=first,
                     piece=piece) as batches:
        got = list(batches)
    assert len(got) == len(REQUESTS)
    for want, frames in zip(REQUESTS, got):
        np.testing.assert_array_equal(frames.reshape(-1), want)
    # decoder 0 used the caller's reader (left open for it); every other decoder opened and closed its own
    assert len(readers) == (decoders - 1 if ahead else 0) and all(r.closed for r in readers) and not first.closed
    # each frame decoded once, and decoder d read its own batches front to back
    assert sorted(first.log + [t for r in readers for t in r.log]) == np.concatenate(REQUESTS).tolist()
    for reader in [first, *readers]:
        assert reader.log == sorted(reader.log)
    assert not decoder_threads()


def test_decoders_run_at_most_ahead_batches_ahead():
    log = []
    with DecodeAhead(REQUESTS, lambda: None, path=PATH, decoders=1, ahead=2, reader=CountingReader(log)) as batches:
        next(iter(batches))
        time.sleep(0.5)  # the decoder fills its queue, then waits
        # the batch handed over, two waiting in the queue, and one decoded that waits to be put
        assert len(log) == 4 * 10
    assert not decoder_threads()


@pytest.mark.parametrize("decoders", [1, 3])
def test_a_decoders_error_is_raised_in_the_caller_naming_the_file(decoders):
    readers = [CountingReader([], fail_at=55.0) for _ in range(decoders)]
    seen = []
    with pytest.raises(DataError, match="/videos/rec.mp4: cannot decode"):
        with DecodeAhead(REQUESTS, lambda: readers.pop(), path=PATH, decoders=decoders, ahead=2,
                         reader=readers.pop()) as batches:
            for frames in batches:
                seen.append(int(frames.reshape(-1)[0]))
    assert seen == [0, 10, 20, 30, 40]  # every batch before the broken one was served
    assert not decoder_threads()


def test_an_unexpected_error_gets_a_note_naming_the_file():
    with pytest.raises(RuntimeError, match="boom") as info:
        with DecodeAhead(REQUESTS, lambda: None, path=PATH, ahead=1,
                         reader=CountingReader([], fail_at=0.0, error=RuntimeError)) as batches:
            list(batches)
    assert f"while decoding {PATH}" in info.value.__notes__
    assert not decoder_threads()


def test_a_reader_that_cannot_open_fails_the_build():
    def open_reader():
        raise DataError("no such video file", file=PATH)

    with pytest.raises(DataError, match="no such video file"):
        with DecodeAhead(REQUESTS, open_reader, path=PATH, decoders=2, ahead=1, reader=CountingReader([])) as b:
            list(b)
    assert not decoder_threads()


def test_ctrl_c_in_the_caller_stops_and_joins_every_decoder():
    readers = [CountingReader([]) for _ in range(3)]
    with pytest.raises(KeyboardInterrupt):
        with DecodeAhead(REQUESTS, lambda: readers.pop(), path=PATH, decoders=3, ahead=1,
                         reader=CountingReader([])) as batches:
            next(iter(batches))
            time.sleep(0.3)  # every decoder is now blocked on its full queue
            assert len(decoder_threads()) == 3
            raise KeyboardInterrupt
    assert not decoder_threads()


@pytest.mark.parametrize(("decoders", "ahead", "message"), [
    (0, 1, "decoders must be an int >= 1, got 0"),
    (2, 0, "decoders=2 decode ahead of the encoder, which prefetch=0 turns off"),
    (1, -1, "prefetch must be an int >= 0, got -1"),
    (1.5, 1, "decoders must be an int >= 1, got 1.5"),
])
def test_bad_settings_are_config_errors(decoders, ahead, message):
    with pytest.raises(ConfigError, match=message):
        DecodeAhead(REQUESTS, lambda: None, path=PATH, decoders=decoders, ahead=ahead, reader=CountingReader([]))
