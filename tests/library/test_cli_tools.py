"""The user-facing tools: samples and download (against a local copy, never the network)."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from spacewalk import download
from spacewalk.benchmarks.registry import find
from spacewalk.benchmarks.spacewalk18.data import samples

from conftest import run_command


def test_samples_cli_reproduces_the_official_file(real_spacewalk18_root, tmp_path):
    out = tmp_path / "test.json"
    assert samples.main(["--root", str(real_spacewalk18_root), "--split", "test", "--out", str(out)]) == 0
    official = json.loads((real_spacewalk18_root / "tasks/step_recognition/test.json").read_text())
    assert json.loads(out.read_text()) == official


def test_samples_cli_on_a_root_without_samples(tiny_root, tmp_path, capsys):
    for f in (tiny_root / "tasks/step_recognition").iterdir():
        f.unlink()
    out = tmp_path / "val.json"
    assert samples.main(["--root", str(tiny_root), "--split", "val", "--out", str(out), "--per-video", "12"]) == 0
    assert [len(v) for v in json.loads(out.read_text()).values()] == [12]
    with pytest.raises(SystemExit) as exit_:
        samples.main(["--root", str(tiny_root), "--split", "val", "--out", str(out), "--per-video", "100000"])
    assert exit_.value.code == 2 and "02022020" in capsys.readouterr().err


def test_download_from_a_local_copy(real_spacewalk18_root, tmp_path):
    root = tmp_path / "sw18"
    # run as a user would, in a subprocess: the module entry point, the progress bar, the final check
    result = run_command("-m", "spacewalk.download", "spacewalk18", "--root", root, "--source", real_spacewalk18_root)
    assert "ready" in result.stdout
    files = find("spacewalk18").release.files
    assert len(files) == 27 and all(f.sha256 for f in files)  # each checked against the pinned release
    for rel in (f.path for f in files):
        assert (root / rel).read_bytes() == (real_spacewalk18_root / rel).read_bytes(), rel
    # a second run resumes: nothing is fetched again
    assert download.download_annotations(find("spacewalk18"), root, str(real_spacewalk18_root)) == []


def test_download_reports_a_missing_source_file(real_spacewalk18_root, tmp_path, capsys):
    source = tmp_path / "copy"
    shutil.copytree(real_spacewalk18_root, source)
    (source / "tasks/question_answering/test.json").unlink()
    assert download.main(["spacewalk18", "--root", str(tmp_path / "x"), "--source", str(source)]) == 2
    err = capsys.readouterr().err
    assert "file not found in the source" in err and "question_answering/test.json" in err
    assert not list((tmp_path / "x").rglob("*.tmp"))  # nothing half-written left behind


def test_download_refuses_a_file_that_is_not_the_pinned_one(tiny_root, tmp_path, capsys):
    # the tiny root's annotation.json is not the release's: named with both hashes, and never given its name
    assert download.main(["spacewalk18", "--root", str(tmp_path / "x"), "--source", str(tiny_root)]) == 2
    err = capsys.readouterr().err
    assert f"{tiny_root}/data/annotation.json" in err and "sha256" in err
    assert "9524b249f58fb7e4b6a55b3ebdf818b4b9ebee7fa8fd5ecffdc641ca85939516" in err  # the pinned one
    assert not (tmp_path / "x/data/annotation.json").exists()
    assert not list((tmp_path / "x").rglob("*.tmp"))


def test_download_videos_uses_ytdlp_and_renames(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "yt-dlp"
    fake.parent.mkdir()
    # a stand-in for yt-dlp: writes its -o target, records its arguments
    fake.write_text("#!/bin/sh\nwhile [ $# -gt 1 ]; do if [ \"$1\" = -o ]; then echo video > \"$2\"; fi; shift; "
                    f"done\necho \"$1\" >> {tmp_path}/calls\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    urls = find("spacewalk18").release.videos(tmp_path / "root")
    written = download.download_videos(find("spacewalk18"), tmp_path / "root", ids=["02282021", "06092023"])
    assert [p.name for p in written] == ["02282021.mp4", "06092023.mp4"]
    assert (tmp_path / "root/data/videos/02282021.mp4").read_text() == "video\n"
    assert (tmp_path / "calls").read_text().split() == [urls["02282021"], urls["06092023"]]
    assert urls["02282021"] == "https://www.youtube.com/watch?v=gcv6beMn750"
    assert sorted(p.name for p in (tmp_path / "root/data/videos").iterdir()) == ["02282021.mp4", "06092023.mp4"]


def test_download_videos_needs_ytdlp(tmp_path):
    with pytest.raises(RuntimeError, match="pip install yt-dlp"):
        download.download_videos(find("spacewalk18"), tmp_path, ytdlp="no-such-yt-dlp-here")


def test_download_hirest_from_a_local_copy(real_hirest_root, tmp_path):
    root = tmp_path / "hirest"
    assert download.main(["hirest", "--root", str(root), "--source", str(real_hirest_root)]) == 0
    for rel in (f.path for f in find("hirest").release.files):
        assert (root / rel).read_bytes() == (real_hirest_root / rel).read_bytes(), rel
    urls = find("hirest").release.videos(root)
    assert len(urls) == 6266 and urls["5V3dI2zp1xA.mp4"] == "https://www.youtube.com/watch?v=5V3dI2zp1xA"


def test_download_hirest_features_unpacks_whole_folders(tmp_path, monkeypatch):
    import dataclasses
    import zipfile

    archive = tmp_path / "ASR.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("ASR/abc.srt", "1\n00:00:00,000 --> 00:00:01,000\nhi\n")
    hirest = find("hirest")
    hirest = dataclasses.replace(hirest, release=dataclasses.replace(hirest.release, features=(str(archive),)))
    root = tmp_path / "root"
    assert download.download_features(hirest, root) == [root / "data/ASR"]
    assert (root / "data/ASR/abc.srt").read_text().endswith("hi\n")
    assert sorted(p.name for p in (root / "data").iterdir()) == ["ASR"]  # no archive or staging left
    assert download.download_features(hirest, root) == []  # resumes: an unpacked folder is kept


def test_download_checks_the_files_already_in_the_root(real_spacewalk18_root, tmp_path, capsys):
    root = tmp_path / "sw18"
    shutil.copytree(real_spacewalk18_root, root)
    assert download.download_annotations(find("spacewalk18"), root, str(real_spacewalk18_root)) == []  # all kept
    # the val step-recognition file replaced by the test one: the names are right, the contents are not
    val = root / "tasks/step_recognition/val.json"
    shutil.copyfile(root / "tasks/step_recognition/test.json", val)
    assert download.main(["spacewalk18", "--root", str(root), "--source", str(real_spacewalk18_root)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # under the progress bar
    assert last.startswith(f"error: {val}: sha256 ") and "not the release's: delete it" in last
    assert val.read_bytes() == (root / "tasks/step_recognition/test.json").read_bytes()  # the user's file untouched
