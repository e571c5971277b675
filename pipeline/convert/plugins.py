"""Document converters from installed distributions: the `tinymemory.converters` entry points.

Each entry point names, as `module:attribute`, a callable that takes the `ConvertLimits` and returns a
`DocumentConverter` (a class whose constructor takes the limits is one). The document chains (`default_chain`,
and `warm_chain` in every converter pool worker) put them ahead of the built-in converters, in the order of
their entry-point names, so a plugin may take a format this build refuses (images, audio) or convert one
better. Markdown, plain text and code stay the native converter's, decoded byte-exact: a plugin claiming one
of them is refused. A plugin that will not load or build is a `ConfigError` when a chain is built, naming
the distribution and the entry point: in a pool worker, every document needing one then fails with it.
"""

from __future__ import annotations

from typing import cast

from engines.contract import ConfigError
from engines.plugins import CONVERTERS_GROUP, Plugin, chosen, declared, load_target, reason
from pipeline.convert.converter import DocumentConverter
from pipeline.convert.limits import ConvertLimits
from pipeline.convert.native import NativeConverter
from pipeline.sniff import DocumentFormat

_REMEDY = "reinstall a working version or uninstall it"


def plugin_converters(limits: ConvertLimits) -> list[DocumentConverter]:
    """The converters installed distributions declare, built with `limits`, in the order of their names."""
    found = declared(CONVERTERS_GROUP)
    return [_built(chosen(found[name], ""), limits) for name in sorted(found)]


def _built(plugin: Plugin, limits: ConvertLimits) -> DocumentConverter:
    if ":" not in plugin.value:
        raise ConfigError(f"converter {plugin.name!r}: {plugin} names a module; name its factory as module:attribute")
    try:
        factory = load_target(plugin.value)
        if not callable(factory):
            raise TypeError(f"{plugin.value} is not callable")
        made: object = factory(limits)
        if not isinstance(getattr(made, "name", None), str) or not all(
            callable(getattr(made, method, None)) for method in ("supports", "convert")
        ):
            raise TypeError(f"{plugin.value} did not return a document converter (a name, supports and convert)")
        converter = cast(DocumentConverter, made)
        native = NativeConverter()
        taken = [fmt.value for fmt in DocumentFormat if native.supports(fmt) and converter.supports(fmt)]
    except MemoryError:
        raise  # a pool worker's memory ceiling, not the plugin's fault
    except Exception as err:  # a plugin's module, factory or claim may raise anything
        raise ConfigError(f"converter {plugin.name!r}: cannot build it ({reason(err)}); {plugin}: {_REMEDY}") from err
    if taken:
        raise ConfigError(
            f"converter {plugin.name!r} claims {', '.join(taken)}, which only the native converter takes (decoded"
            f" byte-exact); {plugin}: ask its authors to claim document formats only"
        )
    return converter
