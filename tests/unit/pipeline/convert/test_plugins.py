"""Converters from installed distributions (`tinymemory.converters` entry points): found by the document chains,
ahead of the built-in converters, and refused with the distribution named when they cannot serve."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import ConfigError
from engines.plugins import CONVERTERS_GROUP
from pipeline.convert import (
    ConvertLimits,
    ImageConverter,
    NativeConverter,
    OfficeConverter,
    RawDocument,
    convert_document,
)
from pipeline.convert.chain import default_chain, native_chain, warm_chain
from tests.fixtures.distributions import CAPTION_CONVERTER, fake_distribution, plugin_site

PNG = b"\x89PNG\r\n\x1a\n"

# A plugin's module: "reads" an image's caption, as a distribution would ship an OCR converter.
CAPTION_MODULE = (
    """
from pipeline.convert import ConvertedDocument
from pipeline.sniff import DocumentFormat, sniff

WARMED = []


"""
    + CAPTION_CONVERTER
    + """

    def warm_up(self):
        WARMED.append(self.limits)


class Greedy(CaptionConverter):
    def supports(self, fmt):
        return True


def nothing(limits):
    return object()
"""
)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from plugin_site(tmp_path, monkeypatch)


def _declare(site: Path, value: str) -> None:
    fake_distribution(site, "tm-caption", {CONVERTERS_GROUP: {"caption": value}}, {"tm_plugin_caption": CAPTION_MODULE})


def test_an_installed_converter_goes_first_and_takes_its_formats(site: Path) -> None:
    _declare(site, "tm_plugin_caption:CaptionConverter")
    limits = ConvertLimits(max_input_bytes=1234)
    chain = default_chain(limits)
    assert [c.name for c in chain.converters] == ["caption", "ocr", "office", "native"]
    assert chain.converters[0].limits == limits  # type: ignore[attr-defined]
    converted = convert_document(RawDocument(PNG + b"CAPTION: a zebracorn", filename="z.png"))
    assert (converted.markdown, converted.metadata) == (" a zebracorn", {"converter": "caption"})
    assert [type(c) for c in native_chain().converters] == [NativeConverter]  # text is decoded, never a plugin's


def test_the_pool_chain_warms_an_installed_converter(site: Path) -> None:
    _declare(site, "tm_plugin_caption:CaptionConverter")
    chain = warm_chain(ConvertLimits())
    assert [type(c) for c in chain.converters[1:]] == [ImageConverter, OfficeConverter, NativeConverter]
    assert len(sys.modules["tm_plugin_caption"].WARMED) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("tm_plugin_caption", "caption = tm_plugin_caption .* names a module; name its factory as module:attribute"),
        ("tm_plugin_gone:Caption", "cannot build it (ModuleNotFoundError: No module named 'tm_plugin_gone'); entry"),
        ("tm_plugin_caption:Missing", "cannot build it (AttributeError: module 'tm_plugin_caption' has no attribute"),
        ("tm_plugin_caption:nothing", "(TypeError: tm_plugin_caption:nothing did not return a document converter"),
        ("tm_plugin_caption:Greedy", "claims markdown, plain_text, code, which only the native converter takes"),
    ],
)
def test_a_broken_converter_plugin_is_named_when_a_chain_is_built(site: Path, value: str, message: str) -> None:
    _declare(site, value)
    assert native_chain().converters  # the text path never loads a plugin
    with pytest.raises(ConfigError, match=re.escape(message).replace(r"\.\*", ".*")) as caught:
        default_chain()
    assert f"entry point caption = {value} in group tinymemory.converters of distribution tm-caption 1.0" in str(
        caught.value
    )
