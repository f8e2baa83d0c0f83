"""One parse of each botocore data file per test process, instead of one per boto3 session.

A CLI run builds a fresh boto3 session, and a session's loader parses the service models it needs
(ec2's alone is megabytes of JSON). A real command does that once per process; the suite runs
hundreds of commands in one process, and re-parsing the same files was a third of its CPU.
Loaders here share what they loaded, keyed by their class and search paths as well as by what
was asked, so a loader with other search paths (moto's) never sees another's data. A loaded model
is what one session already shares between all its clients, so sharing it between sessions
changes nothing a test can observe.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from botocore.loaders import Loader

_LOADED: dict[Hashable, Any] = {}


class _SharedCache:
    """Stands in for a loader's ``_cache`` dict (what botocore's ``instance_cache`` reads and writes)."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def _key(self, key: Hashable) -> Hashable:
        paths = tuple(dict.fromkeys(self._loader.search_paths))
        return (type(self._loader), paths, key)

    def __contains__(self, key: Hashable) -> bool:
        return self._key(key) in _LOADED

    def __getitem__(self, key: Hashable) -> Any:
        return _LOADED[self._key(key)]

    def __setitem__(self, key: Hashable, value: Any) -> None:
        _LOADED[self._key(key)] = value


def share_loaded_models() -> None:
    """Make every botocore loader made from now on in this process share what it loads."""
    if getattr(Loader, "_shares_models", False):
        return
    original_init = Loader.__init__

    def init(self: Loader, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._cache = _SharedCache(self)  # type: ignore[assignment]

    Loader.__init__ = init  # type: ignore[method-assign]
    Loader._shares_models = True  # type: ignore[attr-defined]
