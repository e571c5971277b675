"""Programming language of a file, from its path (docs/spec/sources-and-documents.md §10.4).

The names returned land in `MemoryMeta.language`, so they are a wire contract: change a name here and stored
items stop matching filters written against the old one.
"""

from __future__ import annotations

# Whole file names win over extensions, so `CMakeLists.txt` is cmake and not a `.txt` document.
# Keys are lowercase because the comparison is case-insensitive.
FILE_NAME_LANGUAGES: dict[str, str] = {
    "dockerfile": "dockerfile",
    "containerfile": "dockerfile",
    "makefile": "make",
    "gnumakefile": "make",
    "cmakelists.txt": "cmake",
    "gemfile": "ruby",
    "rakefile": "ruby",
}

# Grouped as the spec's table is, one language a row, so a review can compare the two line by line.
_EXTENSION_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rust", ("rs",)),
    ("python", ("py", "pyi")),
    ("javascript", ("js", "mjs", "cjs", "jsx")),
    ("typescript", ("ts", "mts", "cts", "tsx")),
    ("go", ("go",)),
    ("java", ("java",)),
    ("kotlin", ("kt", "kts")),
    ("swift", ("swift",)),
    ("c", ("c", "h")),
    ("cpp", ("cc", "cpp", "cxx", "hpp", "hh", "hxx")),
    ("csharp", ("cs",)),
    ("ruby", ("rb",)),
    ("php", ("php",)),
    ("scala", ("scala",)),
    ("shell", ("sh", "bash", "zsh")),
    ("powershell", ("ps1",)),
    ("sql", ("sql",)),
    ("lua", ("lua",)),
    ("r", ("r",)),
    ("dart", ("dart",)),
    ("elixir", ("ex", "exs")),
    ("erlang", ("erl",)),
    ("haskell", ("hs",)),
    ("ocaml", ("ml", "mli")),
    ("clojure", ("clj", "cljs")),
    ("zig", ("zig",)),
    ("nix", ("nix",)),
    ("perl", ("pl", "pm")),
    ("protobuf", ("proto",)),
    ("graphql", ("graphql", "gql")),
    ("vue", ("vue",)),
    ("svelte", ("svelte",)),
    ("terraform", ("tf",)),
    ("cmake", ("cmake",)),
    ("css", ("css", "scss")),
    ("json", ("json",)),
    ("yaml", ("yaml", "yml")),
    ("toml", ("toml",)),
    ("xml", ("xml",)),
)

EXTENSION_LANGUAGES: dict[str, str] = {ext: language for language, exts in _EXTENSION_GROUPS for ext in exts}


def file_name(path: str) -> str:
    """The last component of `path`, with `/` and `\\` both taken as separators.

    Sources hand over POSIX paths, GitHub paths and, in embedded mode on Windows, native ones; a backslash in
    a real POSIX file name is rare enough that treating it as a separator is the safer reading.
    """
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def file_extension(path: str) -> str | None:
    """The lowercase extension of the last component of `path`, or None when it has none.

    A leading dot does not start an extension (`.bashrc` has none), as with `pathlib` and Rust's
    `Path::extension`, which the original implementation uses.
    """
    name = file_name(path)
    dot = name.rfind(".")
    if dot <= 0:
        return None
    return name[dot + 1 :].lower()


def language_for_path(path: str) -> str | None:
    """The stable lowercase language name for a file path, or None when the path names no language.

    Document formats (`md`, `txt`, `html`, `pdf`, …) never map to a language.
    """
    by_name = FILE_NAME_LANGUAGES.get(file_name(path).lower())
    if by_name is not None:
        return by_name
    extension = file_extension(path)
    return None if extension is None else EXTENSION_LANGUAGES.get(extension)
