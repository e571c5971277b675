"""Whether a value found after a secret's name is a secret: placeholders, code and prose are not.

Three strengths, for three contexts:

- `assigned`: after an explicit assignment (`=`, `:`, `:=`, `=>`, a command-line flag) or in quotes. A
  value is redacted unless it is a placeholder, code, a path, a literal (`true`, `null`) or an ordinary
  word, and it has at least 8 characters; a password-family name accepts 6 when the value holds a
  non-letter (people choose short passwords: `password: hunter2`).
- `quoted phrase`: a quoted value with spaces after an assignment (`password = "value with spaces"`) is a
  passphrase unless it is a placeholder or names what it stands for (`"Enter your password"`).
- `in prose`: after a name and a space only ("the token for", "secret abc123XYZ"), only a value that looks
  random counts: at least 8 characters, not an ordinary word, and letters mixed with digits (or, from 16
  characters on, both cases or symbols).
"""

from __future__ import annotations

import math
import re
from collections import Counter

from pipeline.scrub.words import is_ordinary

# Template syntaxes (`{{token}}`, `{token}`, `<token>`, `$TOKEN`, `${TOKEN}`, `%TOKEN%`, `$(cmd)`, `[token]`,
# hydra's `^PASS^`)
# and masks (`****`, `xxxxxx`, `...`, `…`); a value holding `{{`, `${` or `<...>` anywhere is a template too.
_PLACEHOLDER = re.compile(
    r"""\{[^{}]*\}|\{\{.*\}\}|<[^<>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%|\$\(.*\)"""
    r"""|\[[^\[\]]*\]|\^[A-Za-z_]+\^|[*xX•·._\-]{3,}|…+|\.{2,}.*"""
)
_TEMPLATE_INSIDE = re.compile(r"\{\{|\$\{|<[A-Za-z_][^<>]*>|\[REDACTED")
# A value that names what it stands for: `password`, `your_api_key`, `<my-token-here>` without brackets.
_SELF_NAMED = re.compile(
    r"(?i)(?:your|my|the|an?|some|example|sample|dummy|fake|test|new|old|real|actual)?[-_ .]?"
    r"(?:password|passwd|pass|pwd|secret|token|api[-_ .]?key|key|value|credentials?|passphrase)s?"
    r"(?:[-_ .]?(?:here|goes[-_ .]here|value))?"
    r"|(?i:change[-_ .]?(?:me|it|this))"  # the conventional defaults a document tells its reader to replace
)
_LITERALS = frozenset(
    {"true", "false", "null", "none", "nil", "undefined", "yes", "no", "on", "off", "empty", "required"}
    | {"optional", "string", "str", "int", "bool", "bytes", "secretstr", "redacted", "hidden", "masked"}
)
# A name path or a call (`self.password`, `os.environ["X"]`, `settings.SECRET_KEY`, `get_token()`); its
# first name must be an ordinary word, so `ya29.a0AfH6` is not taken for one.
_CODE_REFERENCE = re.compile(r"([A-Za-z_$][\w$]*)(?:(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+(?:[(\[].*)?|[(\[].*)")
_PATH = re.compile(r"(?:~|\.{1,2})?/|[A-Za-z]:\\|file:|[A-Za-z][A-Za-z0-9+.-]*://")
# A file name, which a `key_file` or an `ssh_key` setting names instead of holding the key.
_FILE_NAME = re.compile(
    r"[\w.-]+\.(?:pub|pem|key|crt|cer|der|p12|pfx|jks|keystore|gpg|asc|txt|json|ya?ml|toml|ini|cfg|conf|env)"
)
_PROSE_WORDS = re.compile(r"(?i)\b(?:password|passphrase|secret|token|key|enter|your|must|least|characters)\b")
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")
_BASE64_SYMBOL = re.compile(r"[+/=]")
# A version, a size or a duration, a date, a number: what follows "token" in prose without being one.
_MEASURE = re.compile(r"v?[0-9]+(?:[.:/-][0-9]+)*[A-Za-z]{0,3}|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z?")


def is_template(value: str) -> bool:
    """True for a template placeholder or a mask, or a value holding one (or a redaction token)."""
    return _PLACEHOLDER.fullmatch(value) is not None or _TEMPLATE_INSIDE.search(value) is not None


def is_placeholder(value: str) -> bool:
    """True for a template placeholder, a mask, or a value that only names what it stands for."""
    return is_template(value) or _SELF_NAMED.fullmatch(value) is not None


def shannon_entropy(value: str) -> float:
    """Bits per character of the value's own character distribution."""
    if not value:
        return 0.0
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _is_code(value: str) -> bool:
    match = _CODE_REFERENCE.fullmatch(value)
    return match is not None and is_ordinary(match.group(1).strip("_$"))


def _not_a_value(value: str, *, quoted: bool = False) -> bool:
    """What no context takes for a secret: placeholders, literals, paths, code, single ordinary words;
    unquoted, also YAML tags and anchors, mentions, comments and the next command-line flag."""
    if (
        not quoted
        and value
        and (value[0] in "!&*@#" or (value[0] == "-" and value[1:2].isalpha()) or value[:2] == "--")
    ):
        return True
    return (
        not value
        or is_placeholder(value)
        or value.lower() in _LITERALS
        or _PATH.match(value) is not None
        or _FILE_NAME.fullmatch(value) is not None
        or _is_code(value)
        or is_ordinary(value)
        or len(set(value)) == 1
    )


def assigned_secret(value: str, *, password: bool, quoted: bool = False) -> bool:
    """Whether a value assigned to a secret's name (`token = ...`, `--password ...`) is a secret."""
    if _not_a_value(value, quoted=quoted):
        return False
    if len(value) >= 8:
        return True
    return password and len(value) >= 6 and not value.isalpha()


def quoted_phrase_secret(value: str) -> bool:
    """Whether a quoted value with spaces, assigned to a secret's name, is a passphrase."""
    stripped = value.strip()
    if len(stripped) < 8 or is_placeholder(stripped) or _TEMPLATE_INSIDE.search(stripped):
        return False
    # "Enter your password", "At least 8 characters": a form's label, not a passphrase.
    return _PROSE_WORDS.search(stripped) is None


def random_looking(value: str) -> bool:
    """Whether a value met in prose (a name, a space, the value) looks generated rather than written."""
    if len(value) < 8 or _not_a_value(value) or _MEASURE.fullmatch(value) is not None:
        return False
    has_digit = _DIGIT.search(value) is not None
    has_letter = _LETTER.search(value) is not None
    if has_digit and has_letter:
        return shannon_entropy(value) >= 2.5
    if len(value) < 16:
        return False
    # Without digits, only both cases or base64's own symbols tell a generated value from joined words.
    mixed = len(_UPPER.findall(value)) >= 2 and len(_LOWER.findall(value)) >= 2
    return (mixed or _BASE64_SYMBOL.search(value) is not None) and shannon_entropy(value) >= 3.0
