"""The test processes' YAML parsing kept by text (helpers/parsed_yaml.py, installed by conftest.py): a load gives what
OmegaConf's own load gives, a changed file is parsed anew, a config changed after loading leaves the next load as it
was, and a file that does not parse gets OmegaConf's own error."""

from __future__ import annotations

import pytest
import yaml
from omegaconf import OmegaConf

from helpers import parsed_yaml

TEXT = "a: 1\nb: [x, {c: 2.5e-3}]\nanchor: &n {d: 1}\nalias: *n\nempty:\n"


def test_loads_equal_omegaconfs_own_and_follow_the_file(tmp_path):
    assert OmegaConf.load is not parsed_yaml._load  # installed for the whole run
    path = tmp_path / "c.yaml"
    path.write_text(TEXT)
    first = OmegaConf.load(path)
    assert first == parsed_yaml._load(path) and OmegaConf.to_yaml(first) == OmegaConf.to_yaml(parsed_yaml._load(path))
    with open(path, encoding="utf-8") as f:  # a file object, as Hydra passes it
        assert OmegaConf.load(f) == first
    first.b[1].c = 7  # the kept values are copied, never handed out
    assert OmegaConf.load(path).b[1].c == 2.5e-3
    path.write_text(TEXT.replace("a: 1", "a: 2"))
    assert OmegaConf.load(path).a == 2
    assert TEXT in parsed_yaml._parsed and TEXT.replace("a: 1", "a: 2") in parsed_yaml._parsed  # kept by text
    path.write_text("")
    assert OmegaConf.load(path) == {} == parsed_yaml._load(path)
    path.write_bytes(TEXT.encode())
    with open(path, "rb") as f:  # a binary stream: OmegaConf's own load
        assert OmegaConf.load(f) == parsed_yaml._load(path)


def test_a_value_that_is_no_config_gets_omegaconfs_error(tmp_path):
    path = tmp_path / "number.yaml"
    path.write_text("3\n")
    with pytest.raises(IOError, match="Invalid loaded object type"):
        OmegaConf.load(path)


def test_a_file_that_does_not_parse_gets_omegaconfs_error(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("a: 1\na: 2\n")  # a duplicate key: OmegaConf's loader refuses it
    with pytest.raises(yaml.YAMLError, match="duplicate key a"):
        OmegaConf.load(path)
    path.write_text("a: [1\n")
    with pytest.raises(yaml.YAMLError) as error, open(path, encoding="utf-8") as f:
        OmegaConf.load(f)
    assert "broken.yaml" in str(error.value)  # the file's name, as OmegaConf's own load gives it
