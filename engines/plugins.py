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
from collections.abc import Callable, Iterable, Mapping, Sequence
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


@dataclass(frozen=True)
class Offer:
    """Where an offered name's module is (`module` or `module:attribute`), and who declared it: an entry point,
    or empty for a name registered in code or by a setting."""

    module: str
    origin: str = ""


class Offers:
    """Names a registry offers, from three places, highest precedence first: registered (in code, or by a
    setting), built in, declared by installed distributions under one entry-point group.

    A built-in name is never replaced: an entry point declaring it with another module is refused when the name
    is looked up, as a name two distributions declare differently is. Checking a registration is the
    registry's own affair; here it simply wins over an entry point.
    """

    def __init__(self, built_in: Iterable[tuple[str, str]], plugins: Callable[[], Declared], remedy: str) -> None:
        """`remedy` is the other way out offered when two distributions declare one name (" or …")."""
        self._built_in = dict(built_in)
        self._registered: dict[str, str] = {}
        self._plugins = plugins
        self._remedy = remedy

    def known(self, name: str) -> str | None:
        """The module registered or built in under `name` (entry points not consulted)."""
        return self._registered.get(name) or self._built_in.get(name)

    def register(self, name: str, module: str) -> None:
        self._registered[name] = module

    def unregister(self, name: str) -> None:
        self._registered.pop(name, None)

    def names(self) -> list[str]:
        """Every name offered: built in, registered, then declared (none of them loaded)."""
        return list(dict.fromkeys([*self._built_in, *self._registered, *self._plugins()]))

    def find(self, name: str) -> Offer | None:
        """Where `name`'s module is, or None; a refused entry point is a `ConfigError`."""
        registered = self._registered.get(name)
        if registered is not None:
            return Offer(registered)
        plugins = self._plugins().get(name, ())
        built_in = self._built_in.get(name)
        if built_in is not None:
            refuse_shadowing(plugins, built_in)
            return Offer(built_in)
        if plugins:
            plugin = chosen(plugins, self._remedy)
            return Offer(plugin.value, origin=str(plugin))
        return None


def load_offered(what: str, value: str, attribute: str | None, origin: str, remedy: str) -> object:
    """What `value` names (see `load_target`), for the registry entry `what` (`source kind 'x'`, say); a module
    that fails to import, or lacks the attribute, is a `ConfigError` naming where it was declared.

    `remedy` is the advice for a name registered in code or by a setting; a declared one is told to reinstall.
    """
    try:
        return load_target(value, attribute)
    except MemoryError:
        raise
    except Exception as err:  # a plugin's module may raise anything while it imports
        name = target_name(value, attribute) if attribute is not None else value
        raise ConfigError(f"{what}: cannot load {name} ({reason(err)}){remedy_for(origin, remedy)}") from err


def remedy_for(origin: str, otherwise: str) -> str:
    """How a message about a broken plugin ends: where it was declared and what to do, else `otherwise`."""
    if origin:
        return f"; it is declared by {origin}: reinstall a working version or uninstall it"
    return otherwise


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
