"""`language_for_path` against the tables of docs/spec/sources-and-documents.md §10.4."""

from __future__ import annotations

import pytest

from pipeline.languages import (
    EXTENSION_LANGUAGES,
    FILE_NAME_LANGUAGES,
    file_extension,
    file_name,
    language_for_path,
)

# The spec's tables, written out again here so a typo in the module's copy fails a test.
FILE_NAMES = [
    ("Dockerfile", "dockerfile"),
    ("Containerfile", "dockerfile"),
    ("Makefile", "make"),
    ("GNUmakefile", "make"),
    ("CMakeLists.txt", "cmake"),
    ("Gemfile", "ruby"),
    ("Rakefile", "ruby"),
]

EXTENSIONS = [
    ("rs", "rust"),
    ("py", "python"),
    ("pyi", "python"),
    ("js", "javascript"),
    ("mjs", "javascript"),
    ("cjs", "javascript"),
    ("jsx", "javascript"),
    ("ts", "typescript"),
    ("mts", "typescript"),
    ("cts", "typescript"),
    ("tsx", "typescript"),
    ("go", "go"),
    ("java", "java"),
    ("kt", "kotlin"),
    ("kts", "kotlin"),
    ("swift", "swift"),
    ("c", "c"),
    ("h", "c"),
    ("cc", "cpp"),
    ("cpp", "cpp"),
    ("cxx", "cpp"),
    ("hpp", "cpp"),
    ("hh", "cpp"),
    ("hxx", "cpp"),
    ("cs", "csharp"),
    ("rb", "ruby"),
    ("php", "php"),
    ("scala", "scala"),
    ("sh", "shell"),
    ("bash", "shell"),
    ("zsh", "shell"),
    ("ps1", "powershell"),
    ("sql", "sql"),
    ("lua", "lua"),
    ("r", "r"),
    ("dart", "dart"),
    ("ex", "elixir"),
    ("exs", "elixir"),
    ("erl", "erlang"),
    ("hs", "haskell"),
    ("ml", "ocaml"),
    ("mli", "ocaml"),
    ("clj", "clojure"),
    ("cljs", "clojure"),
    ("zig", "zig"),
    ("nix", "nix"),
    ("pl", "perl"),
    ("pm", "perl"),
    ("proto", "protobuf"),
    ("graphql", "graphql"),
    ("gql", "graphql"),
    ("vue", "vue"),
    ("svelte", "svelte"),
    ("tf", "terraform"),
    ("cmake", "cmake"),
    ("css", "css"),
    ("scss", "css"),
    ("json", "json"),
    ("yaml", "yaml"),
    ("yml", "yaml"),
    ("toml", "toml"),
    ("xml", "xml"),
]

# Formats of docs/spec/sources-and-documents.md §10.1 and their sniffing extensions: never a language.
DOCUMENT_EXTENSIONS = ["md", "markdown", "mdown", "txt", "text", "log", "html", "htm", "xhtml", "pdf"]
DOCUMENT_EXTENSIONS += ["docx", "xlsx", "xlsm", "pptx", "doc", "xls", "ppt", "bin"]


@pytest.mark.parametrize(("name", "language"), FILE_NAMES)
def test_whole_file_names(name: str, language: str) -> None:
    assert language_for_path(name) == language
    assert language_for_path(name.upper()) == language
    assert language_for_path(name.lower()) == language
    assert language_for_path(f"some/dir/{name}") == language


@pytest.mark.parametrize(("extension", "language"), EXTENSIONS)
def test_extensions(extension: str, language: str) -> None:
    assert language_for_path(f"file.{extension}") == language
    assert language_for_path(f"src/deep/File.{extension.upper()}") == language


def test_the_tables_are_complete() -> None:
    # Every file name and extension the module knows is one the spec lists, and the other way round.
    assert {name.lower(): language for name, language in FILE_NAMES} == FILE_NAME_LANGUAGES
    assert dict(EXTENSIONS) == EXTENSION_LANGUAGES


@pytest.mark.parametrize("extension", DOCUMENT_EXTENSIONS)
def test_document_formats_are_never_languages(extension: str) -> None:
    assert language_for_path(f"notes.{extension}") is None


@pytest.mark.parametrize(
    "path",
    [
        "",
        "README",
        "LICENSE.txt",
        ".bashrc",
        ".py",
        "file.",
        "archive.tar.gz",
        "Dockerfile.dev",
        "my.Makefile.bak",
        "dir.py/README",
    ],
)
def test_paths_without_a_language(path: str) -> None:
    assert language_for_path(path) is None


def test_whole_name_wins_over_the_extension() -> None:
    # CMakeLists.txt would be a plain-text document by its extension.
    assert language_for_path("CMakeLists.txt") == "cmake"
    assert language_for_path("cmakelists.TXT") == "cmake"


def test_windows_separators() -> None:
    assert language_for_path("C:\\src\\Makefile") == "make"
    assert language_for_path("C:\\src\\main.go") == "go"


@pytest.mark.parametrize(
    ("path", "name", "extension"),
    [
        ("a/b/c.PY", "c.PY", "py"),
        ("a\\b.c\\d", "d", None),
        (".hidden", ".hidden", None),
        (".hidden.yml", ".hidden.yml", "yml"),
        ("x.tar.gz", "x.tar.gz", "gz"),
        ("trailing.", "trailing.", ""),
        ("dir/", "", None),
    ],
)
def test_file_name_and_extension(path: str, name: str, extension: str | None) -> None:
    assert file_name(path) == name
    assert file_extension(path) == extension
