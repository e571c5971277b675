"""Plugins by entry points: what installed distributions declare under the `tinymemory.*` groups.

A distribution offers a source kind, a memory engine or a document converter by declaring an entry point
(docs/extending.md has a complete example):

    tinymemory.sources      kind name  = the module holding `SPEC` (or `module:attribute`, another `KindSpec`)
    tinymemory.engines      engine id  = the module holding `DESCRIPTOR` and `build`
    tinymemory.converters   any name   = `module:attribute`, a callable taking `ConvertLimits`, giving a converter

Discovery reads the installed distributions' metadata, once per group and process, on first need; it imports
nothing a plugin holds. A plugin's module is imported only when its kind, engine or converter is used, and a
broken or duplicate declaration is a `ConfigError` raised then, naming the distribution, the entry point and
the reason: a command that uses none of them never sees it. The registries built on this (sources, engines,
converters) decide precedence: what is registered in code or by a setting comes first.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from engines.contract import ConfigError

SOURCES_GROUP = "tinymemory.sources"
ENGINES_GROUP = "tinymemory.engines"
CONVERTERS_GROUP = "tinymemory.converters"


@dataclass(frozen=True)
class Plugin:
    """One entry point: its group, its name, its value (`module` or `module:attribute`) and who declares it."""

    group: str
    name: str
    value: str
    distribution: str

    def __str__(self) -> str:
        return f"entry point {self.name} = {self.value} in group {self.group} of distribution {self.distribution}"


Declared = Mapping[str, Sequence[Plugin]]
"""Entry points by name; more than one under a name when several distributions declare it."""


@functools.cache
def declared(group: str) -> Declared:
    """Every entry point of `group` by name, in the order their distributions are found on `sys.path`.

    Read once per process (`forget` reads again); only metadata is read, no plugin module is imported.
    """
    found: dict[str, list[Plugin]] = {}
    for point in entry_points(group=group):
        found.setdefault(point.name, []).append(Plugin(group, point.name, point.value, _distribution(point)))
    return {name: tuple(plugins) for name, plugins in found.items()}


def forget() -> None:
    """Read the installed distributions again on the next need (after installing or removing one)."""
    declared.cache_clear()
    # importlib.metadata caches each sys.path folder's listing by its modification time, which a
    # distribution written within the same tick would not change.
    importlib.invalidate_caches()


def no_plugins() -> Declared:
    """A registry that offers only what is registered in code (a test's own registry)."""
    return {}


def chosen(plugins: Sequence[Plugin], remedy: str) -> Plugin:
    """The plugin a name stands for: the one declaring it, or several declaring the same value.

    Two distributions declaring the name with different values is a `ConfigError` naming both; `remedy` is
    what else the person may do (" or …", say, override the name by a setting), after "uninstall one of them".
    """
    distinct: dict[str, Plugin] = {}
    for plugin in plugins:
        distinct.setdefault(plugin.value, plugin)
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    first, second = sorted(distinct.values(), key=lambda plugin: (plugin.distribution, plugin.value))[:2]
    raise ConfigError(f"{_named(first)} is declared twice, by {first} and by {second}; uninstall one of them{remedy}")


def refuse_shadowing(plugins: Sequence[Plugin], built_in: str) -> None:
    """Refuse an entry point that declares a built-in name (`built_in` being its module) with another value."""
    for plugin in plugins:
        if plugin.value != built_in:
            raise ConfigError(
                f"{_named(plugin)} is built in, but {plugin} declares it too; "
                "uninstall that distribution or ask its authors to rename the entry point"
            )


def load_target(value: str, attribute: str | None = None) -> object:
    """What `value` names: `module:attribute`, else the module's `attribute`, else the module itself.

    Imports the module, so it raises whatever a broken plugin raises; callers turn that into a `ConfigError`.
    """
    module_name, _, named = value.partition(":")
    module = importlib.import_module(module_name.strip())
    wanted = named.strip() or attribute
    if wanted is None:
        return module
    target: object = module
    for part in wanted.split("."):
        target = getattr(target, part)
    return target


def target_name(value: str, attribute: str) -> str:
    """How an error names what `value` points at: `module:attribute`, or `module.attribute` by default."""
    return value.strip() if ":" in value else f"{value.strip()}.{attribute}"


def reason(err: BaseException) -> str:
    """A plugin's failure in one line: the exception's class and message, without a traceback."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _distribution(point: EntryPoint) -> str:
    dist = point.dist
    if dist is None:
        return "(unnamed)"
    return f"{dist.name} {dist.version}"


def _named(plugin: Plugin) -> str:
    """The plugin's name as its registry's own messages write it (engine ids in double quotes)."""
    if plugin.group == ENGINES_GROUP:
        return f'memory engine "{plugin.name}"'
    what = {SOURCES_GROUP: "source kind", CONVERTERS_GROUP: "converter"}.get(plugin.group, "plugin")
    return f"{what} {plugin.name!r}"
