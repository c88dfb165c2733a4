"""Each YAML text parsed once per test process: Hydra reads every file of a composition again at each compose
(train.py's config is about 25 files) through `OmegaConf.load`, whose parser is PyYAML's pure-Python one, and
parsing is about a quarter of a composition's time (profiled); the suite composes several hundred configs in its own
processes (the config, task and documented-command tests, the in-process runs).

`keep_parsed_yaml()` makes `OmegaConf.load` keep what it parsed, by the text: the file is still read at every load, a
text not seen before is parsed (an edited file is parsed anew), and the config is built from a copy of the parsed
values, as `OmegaConf.load` builds it. A text that does not parse goes to OmegaConf's own load, which raises its own
error (naming the file)."""

from __future__ import annotations

import copy
import io
import os
import pathlib

import yaml
from omegaconf import OmegaConf
from omegaconf._utils import get_yaml_loader

_parsed: dict[str, object] = {}  # never emptied: a test process parses a few hundred distinct texts
_load = OmegaConf.load


def _kept_load(file_):
    start = None
    if isinstance(file_, (str, pathlib.Path)):
        with open(os.path.abspath(file_), encoding="utf-8") as f:
            text = f.read()
    elif getattr(file_, "read", None) and getattr(file_, "seekable", lambda: False)():
        start = file_.tell()
        text = file_.read()
    else:  # a stream that cannot be read twice
        return _load(file_)

    def own_load():  # OmegaConf's, from where the stream was
        if start is not None:
            file_.seek(start)
        return _load(file_)

    if not isinstance(text, str):  # a binary stream
        return own_load()
    if text not in _parsed:
        try:
            _parsed[text] = yaml.load(io.StringIO(text), Loader=get_yaml_loader())
        except yaml.YAMLError:
            return own_load()  # which raises its own error
    obj = copy.deepcopy(_parsed[text])
    if obj is not None and not isinstance(obj, (list, dict, str)):
        return own_load()  # which refuses it
    return OmegaConf.create() if obj is None else OmegaConf.create(obj)


def keep_parsed_yaml() -> None:
    OmegaConf.load = staticmethod(_kept_load)
