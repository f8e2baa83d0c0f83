"""What botocore builds once per session, built once per test process instead.

A CLI run builds a fresh boto3 session, and a session's loader parses the service models it needs
(ec2's alone is megabytes of JSON), then makes one method per operation for each client class
(ec2 has hundreds). A real command does that once per process; the suite runs hundreds of commands
in one process, and doing it again each time was a third of its CPU.

- Loaders share what they loaded, keyed by their class, file loader, extras and search paths as
  well as by what was asked, so a loader with other search paths (moto's) never sees another's data. A loaded model is
  what one session already shares between all its clients.
- A client class's operation methods (each only calls ``self._make_api_call(<operation>, kwargs)``)
  are made once per service and operation list. The class itself is still made per session, with
  that session's ``creating-client-class`` handlers, from a copy of those methods.

Neither changes what a client sends, receives or raises. (A shared method's docstring is rendered
with the first session's documentation handlers; no test reads one.)
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from botocore.client import ClientCreator
from botocore.loaders import Loader

_LOADED: dict[Hashable, Any] = {}
_METHODS: dict[Hashable, dict[str, Any]] = {}


class _SharedCache:
    """Stands in for a loader's ``_cache`` dict (what botocore's ``instance_cache`` reads and writes)."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def _key(self, key: Hashable) -> Hashable:
        loader = self._loader
        paths = tuple(dict.fromkeys(loader.search_paths))
        return (type(loader), type(loader.file_loader), tuple(loader.extras_types), paths, key)

    def __contains__(self, key: Hashable) -> bool:
        return self._key(key) in _LOADED

    def __getitem__(self, key: Hashable) -> Any:
        return _LOADED[self._key(key)]

    def __setitem__(self, key: Hashable, value: Any) -> None:
        _LOADED[self._key(key)] = value


def share_loaded_models() -> None:
    """Make botocore's loaders and client creators share, from now on in this process, what they build."""
    if getattr(Loader, "_shares_models", False):
        return
    original_init = Loader.__init__
    original_methods = ClientCreator._create_methods

    def init(self: Loader, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._cache = _SharedCache(self)  # type: ignore[assignment]

    def create_methods(self: ClientCreator, service_model: Any) -> dict[str, Any]:
        key = (service_model.service_name, tuple(service_model.operation_names))
        if key not in _METHODS:
            _METHODS[key] = original_methods(self, service_model)
        return dict(_METHODS[key])  # the class's own copy: creating-client-class handlers add to it

    Loader.__init__ = init  # type: ignore[method-assign]
    ClientCreator._create_methods = create_methods  # type: ignore[method-assign]
    Loader._shares_models = True  # type: ignore[attr-defined]
