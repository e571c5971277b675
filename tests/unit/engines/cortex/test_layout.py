"""Scope layouts: the legacy one and v3 below a root, paths both ways, and other writers' scopes left alone."""

from __future__ import annotations

import pytest

from engines.contract import ConfigError, InvalidRequestError, ItemKind, Namespace
from engines.cortex.layout import LegacyLayout, RootedLayout, layout_for

N = Namespace.parse


@pytest.mark.parametrize(
    ("node", "kind", "path"),
    [
        ("root", ItemKind.LEARNING, "app:tinymemory/app:learnings"),
        ("agent:scout", ItemKind.DOCUMENT, "app:tinymemory/agent:scout/app:documents"),
        ("team:acme/agent:writer", ItemKind.LEARNING, "app:tinymemory/team:acme/agent:writer/app:learnings"),
        ("source:pdf", ItemKind.DOCUMENT, "app:tinymemory/source:pdf/app:documents"),
        ("ws:main", ItemKind.CONVERSATION, "app:tinymemory/ws:main/app:conversations"),
    ],
)
def test_legacy_paths(node: str, kind: ItemKind, path: str) -> None:
    layout = LegacyLayout(hosted=False)
    assert layout.path(N(node), kind) == path
    scope = layout.parse(path)
    assert scope is not None and (scope.node, scope.kind, scope.path) == (N(node), kind, path)


def test_legacy_reads_past_the_hosted_tenant_but_not_other_roots() -> None:
    hosted, direct = LegacyLayout(hosted=True), LegacyLayout(hosted=False)
    scope = hosted.parse("org:tenant-1/app:tinymemory/agent:a/app:learnings")
    assert scope is not None and scope.path == "app:tinymemory/agent:a/app:learnings"
    assert direct.parse("org:tenant-1/app:tinymemory/agent:a/app:learnings") is None
    for foreign in ("app:other/app:learnings", "app:tinymemory/agent:a", "app:tinymemory/bogus:x/app:learnings"):
        assert direct.parse(foreign) is None


@pytest.mark.parametrize(
    ("node", "kind", "path"),
    [
        ("root", ItemKind.LEARNING, "user:42/app:learnings"),
        ("source:gmail", ItemKind.DOCUMENT, "user:42/app:brain/source:gmail"),
        ("source:github/project:api", ItemKind.DOCUMENT, "user:42/app:brain/source:github/project:api"),
        ("ws:main/agent:a", ItemKind.CONVERSATION, "user:42/ws:main/agent:a/app:conversations"),
        ("ws:main/service:newsletter", ItemKind.LEARNING, "user:42/ws:main/app:flows/service:newsletter/app:learnings"),
        ("service:digest", ItemKind.DOCUMENT, "user:42/app:flows/service:digest/app:documents"),
        ("source:x", ItemKind.LEARNING, "user:42/source:x/app:learnings"),
    ],
)
def test_v3_paths_of_the_spec(node: str, kind: ItemKind, path: str) -> None:
    layout = RootedLayout("user:42", hosted=False)
    assert layout.path(N(node), kind) == path
    scope = layout.parse(path)
    assert scope is not None and (scope.node, scope.kind) == (N(node), kind)


def test_v3_hosted_paths_are_relative_to_the_tenant() -> None:
    layout = RootedLayout("org:acme", hosted=True)
    assert layout.path(N("ws:main"), ItemKind.LEARNING) == "ws:main/app:learnings"
    for listed in ("org:acme/ws:main/app:learnings", "ws:main/app:learnings", "org:x/org:acme/ws:main/app:learnings"):
        scope = layout.parse(listed)
        assert scope is not None and scope.path == "ws:main/app:learnings", listed
    assert layout.discovery_prefix(Namespace.ROOT) is None


def test_v3_leaves_alone_what_it_did_not_write() -> None:
    layout = RootedLayout("user:42", hosted=False)
    for foreign in (
        "user:43/app:learnings",
        "user:42/app:flows/app:learnings",  # a grouping segment out of place
        "user:42/ws:main",
        "user:42/app:brain/ws:main/source:x",
    ):
        assert layout.parse(foreign) is None, foreign
    with pytest.raises(InvalidRequestError, match="repeats the scope root"):
        layout.path(N("user:42/agent:a"), ItemKind.LEARNING)


@pytest.mark.parametrize("root", ["", "  /  ", "app:tinymemory", "bogus:x", "user:4 2", "user"])
def test_bad_roots_are_configuration_errors(root: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RootedLayout(root, hosted=False)
    assert caught.value.message.startswith("scope root ")


def test_the_layout_follows_the_root() -> None:
    assert isinstance(layout_for(False, None), LegacyLayout)
    assert isinstance(layout_for(False, " "), LegacyLayout)
    assert isinstance(layout_for(True, "/org:acme/"), RootedLayout)
