"""spacewalk.core.io.atomic_dir: a folder appears whole under its final name or not at all; ensure_generated: a
generated dataset written on first use, reused, rewritten when its options changed, a foreign folder untouched."""

import pytest

from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_dir, ensure_generated, load_json, remove_leftover_work, write_json


def test_atomic_dir_installs_replaces_and_cleans_up(tmp_path):
    final = tmp_path / "bank"
    with atomic_dir(final) as work:
        assert not final.exists()  # nothing under the final name while it is being built
        (work / "a.txt").write_text("one")
    assert (final / "a.txt").read_text() == "one"

    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_dir(final) as work:
            (work / "a.txt").write_text("two")
            raise RuntimeError("interrupted")
    assert (final / "a.txt").read_text() == "one"  # the old folder is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank"]  # no work folder left behind

    with atomic_dir(final) as work:  # replace=True by default
        (work / "b.txt").write_text("two")
    assert sorted(p.name for p in final.iterdir()) == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank"]  # the moved-aside old copy is deleted


def test_atomic_dir_without_replace_keeps_a_folder_that_appeared(tmp_path):
    final = tmp_path / "dataset"
    with pytest.raises(FileExistsError, match="dataset appeared while it was being written"):
        with atomic_dir(final, replace=False) as work:
            (work / "x").write_text("new")
            final.mkdir()  # another writer got there first
            (final / "y").write_text("theirs")
    assert sorted(p.name for p in final.iterdir()) == ["y"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset"]


def test_ensure_generated_writes_reuses_regenerates_and_refuses_a_foreign_folder(tmp_path):
    calls = []

    def generator(options):
        def generate(overwrite):
            calls.append((options, overwrite))
            with atomic_dir(tmp_path / "set", replace=overwrite) as work:
                write_json(work / "synthetic.json", {"generator": "g", "options": options})
            return tmp_path / "set"
        return generate

    def ensure(options):
        return ensure_generated(tmp_path / "set", "synthetic.json", {"generator": "g", "options": options},
                                generator(options), "a synthetic set")

    (tmp_path / "set").mkdir()  # an empty folder counts as absent
    assert ensure(1) == tmp_path / "set" and calls == [(1, True)]
    ensure(1)
    assert calls == [(1, True)]  # up to date: not written again
    ensure(2)
    assert calls[-1] == (2, True) and load_json(tmp_path / "set/synthetic.json")["options"] == 2
    write_json(tmp_path / "set/synthetic.json", {"generator": "someone else"})
    with pytest.raises(ValueError, match="is not a synthetic set .*pick another root"):
        ensure(2)
    assert len(calls) == 2


def test_load_json_refuses_a_key_repeated_in_one_object(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"videos": {"v1": [1], "v2": [2], "v1": [3]}, "v1": 0}')
    with pytest.raises(DataError, match="more than once") as e:
        load_json(path)
    assert (e.value.file, e.value.item, e.value.field) == (path, "v1", "v1")
    path.write_text('[{"id": 1}, {"id": 1}]')  # the same key in two objects is no repeat
    assert load_json(path) == [{"id": 1}, {"id": 1}]


def test_a_killed_writers_work_folder_is_removed_and_nothing_else(tmp_path):
    # a signal ends a process without atomic_dir's cleanup: its work folder stays beside the final one
    (tmp_path / "bank").mkdir()
    left = tmp_path / ".bank.k3j9x.partial"
    left.mkdir()
    (left / "half.npy").write_bytes(b"x")
    other = tmp_path / ".banks.a1.partial"  # another folder's work: a prefix of its name is not this one
    other.mkdir()
    assert remove_leftover_work(tmp_path / "bank") == [left]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".banks.a1.partial", "bank"]
    assert remove_leftover_work(tmp_path / "missing" / "bank") == []
