"""One warning per old form: what the plugin contract (`algorithms.PLUGIN_API`) and the config
names keep accepting for a version after a change, and how they say so.

Every old form still works and warns once per process (per key), naming what to write instead;
`bench` prints these warnings as one `bench: warning: ...` line. Standard library only.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

_warned: set[Any] = set()


class DeprecatedFormWarning(FutureWarning):
    """An old form (of an earlier plugin contract, or an old config name) that is still accepted
    for one version, read as its new form. A FutureWarning, so Python shows it by default."""


def warn_once(key: Any, message: str, stacklevel: int = 3) -> None:
    """Warn `message` the first time `key` is seen in this process; later calls are silent."""
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, DeprecatedFormWarning, stacklevel=stacklevel)


def forget_warnings() -> None:
    """Warn again for keys already warned about (tests)."""
    _warned.clear()


def renamed_keywords(**new_by_old: str) -> Callable:
    """Decorator: keyword arguments renamed in a later plugin contract are still accepted under
    their old names (`@renamed_keywords(eps_low="dis_eps_low")`), with one warning per name."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            old = [name for name in new_by_old if name in kwargs]
            if old:
                for name in old:
                    if new_by_old[name] in kwargs:
                        raise TypeError(
                            f"{fn.__name__}() got {name}= and {new_by_old[name]}=, two names of one argument"
                        )
                    kwargs[new_by_old[name]] = kwargs.pop(name)
                warn_once(
                    ("renamed keywords", fn.__qualname__),
                    f"{fn.__module__}.{fn.__name__}({'=..., '.join(old)}=...): since plugin API 2 "
                    f"{'=..., '.join(new_by_old[name] for name in old)}=...; the old names are read as "
                    "those for now",
                )
            return fn(*args, **kwargs)

        return call

    return wrap
