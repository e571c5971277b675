"""Credentials found by where they stand: values assigned to secret-like names in every common syntax,
passwords in URLs and DSNs, and private-key blocks (`assignments`, `urls`, `keys`).

The labelled table draws high-entropy values with a seeded random source; the tests after it pin the
rule's edges: what it keeps, where it stops, and the listed misses of the spec's keyword shape.
"""

from __future__ import annotations

import base64
import json
import random

import pytest

from pipeline.scrub import Policy, has_likely_secret, sanitize_text
from tests.unit.pipeline.scrub.test_tables import ALNUM, BASE64, HEX, Labelled, draw, misses, well_formed

SPEC = Policy.spec_compatible()
_SYMBOLS = "!#%*+-_.~"

# Names a value is assigned to, as code, configuration and command lines spell them.
NAMES = (
    "api_key", "apiKey", "API_KEY", "client_secret", "clientSecret", "db_pass", "DB_PASSWORD", "private_key",
    "passwd", "secret_key", "access_token", "auth_token", "AWS_SECRET_ACCESS_KEY", "password", "token",
    "github_token", "SLACK_SIGNING_SECRET", "stripeSecretKey", "mysql_root_password", "pwd", "passphrase",
    "refresh_token", "app_secret", "master_key", "encryption_key", "x-api-key", "AccountKey", "SharedAccessKey",
)  # fmt: skip

# (label, template): `{k}` is the name, `{v}` the value; templates that quote may hold symbols.
SYNTAXES = (
    ("python", '{k} = "{v}"', True),
    ("python_annotated", '{k}: str = "{v}"', True),
    ("javascript", "const {k} = '{v}';", True),
    ("go", '{k} := "{v}"', True),
    ("dotenv", "{k}={v}", False),
    ("dotenv_export", 'export {k}="{v}"', True),
    ("yaml", "  {k}: {v}\n  next: 1", False),
    ("yaml_quoted", "{k}: '{v}'", True),
    ("json", '{{"{k}": "{v}", "region": "eu"}}', True),
    ("toml", '[service]\n{k} = "{v}"', True),
    ("xml", "<{k}>{v}</{k}>", False),
    ("php", "'{k}' => '{v}',", True),
    ("ruby", "{k}: '{v}'", True),
    ("properties", "spring.datasource.{k}={v}", False),
    ("query_string", "https://api.example.com/v1/items?{k}={v}&page=2", False),
    ("flag", "deploy --{k} {v} --region eu", False),
    ("flag_equals", "deploy --{k}={v}", False),
    ("header", "{k}: {v}", False),
)
_PER_PAIR = 2


def _value(rng: random.Random, quoted: bool) -> str:
    head = rng.choice(ALNUM)
    return head + draw(rng, ALNUM + (_SYMBOLS if quoted else "-_"), rng.randint(11, 39))


def _assigned_rows(rng: random.Random) -> list[Labelled]:
    rows = []
    for label, template, quoted in SYNTAXES:
        for name in NAMES:
            if label.startswith("flag") and not name.islower():
                continue  # flags are spelled in lower case
            for _ in range(_PER_PAIR):
                value = _value(rng, quoted)
                rows.append(Labelled(f"assigned:{label}", template.format(k=name, v=value), (value,)))
    return rows


def _url_rows(rng: random.Random) -> list[Labelled]:
    rows = []
    for template in (
        "https://{u}:{p}@git.example.com/team/repo.git",
        "postgres://{u}:{p}@db.internal:5432/app",
        "postgresql://{u}:{p}@localhost/app?sslmode=require",
        "mysql://{u}:{p}@10.0.0.5/shop",
        "mongodb+srv://{u}:{p}@cluster0.example.net/?retryWrites=true",
        "redis://:{p}@cache:6379/0",
        "amqp://{u}:{p}@rabbit:5672/vhost",
        "ftp://{u}:{p}@files.example.org/pub",
        "DATABASE_URL=postgres://{u}:{p}@db/app",
        "clone it with `git clone https://{u}:{p}@example.com/x.git` first",
    ):
        for _ in range(6):
            user, password = draw(rng, ALNUM, 6).lower(), _value(rng, quoted=False)
            rows.append(Labelled("url_password", template.format(u=user, p=password), (password,)))
    return rows


def _pem(rng: random.Random, label: str, lines: int) -> tuple[str, list[str]]:
    body = [draw(rng, BASE64, 64) for _ in range(lines)]
    return f"-----BEGIN {label}-----\n" + "\n".join(body), body


def _key_rows(rng: random.Random) -> list[Labelled]:
    rows = []
    for label in ("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "DSA PRIVATE KEY",
                  "ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):  # fmt: skip
        for _ in range(4):
            head, body = _pem(rng, label, rng.randint(2, 8))
            end = label.replace("BEGIN", "END")
            rows.append(Labelled("private_key", f"key:\n{head}\n-----END {end}-----\ndone", tuple(body)))
            # The miss: no END line (a truncated paste) is redacted to the end of its base64 body.
            rows.append(Labelled("private_key_unterminated", f"key:\n{head}\n\nthat was it", tuple(body)))
            escaped = json.dumps({"private_key": f"{head}\n-----END {end}-----\n"})
            rows.append(Labelled("private_key_in_json", escaped, tuple(body)))
    for _ in range(4):
        private = [draw(rng, BASE64, 64) for _ in range(3)]
        putty = (
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ci\nPublic-Lines: 2\n"
            + "\n".join(draw(rng, BASE64, 64) for _ in range(2))
            + "\nPrivate-Lines: 3\n"
            + "\n".join(private)
            + f"\nPrivate-MAC: {draw(rng, HEX, 64)}\n"
        )
        rows.append(Labelled("private_key_putty", putty, tuple(private)))
    return rows


def _header_rows(rng: random.Random) -> list[Labelled]:
    rows = []
    for _ in range(12):
        user, password = draw(rng, ALNUM, 8), _value(rng, quoted=True)
        encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
        rows.append(
            Labelled("basic_auth_header", f"curl -H 'Authorization: Basic {encoded}' https://x.example", (encoded,))
        )
    return rows


def credential_rows(seed: int = 15) -> list[Labelled]:
    """The labelled table of assigned values, URL passwords, private keys and basic-auth headers."""
    rng = random.Random(seed)
    return _assigned_rows(rng) + _url_rows(rng) + _key_rows(rng) + _header_rows(rng)


CREDENTIAL_ROWS = credential_rows()


def test_the_table_is_well_formed() -> None:
    well_formed(CREDENTIAL_ROWS)


def test_every_row_is_redacted() -> None:
    assert misses(CREDENTIAL_ROWS) == []


def test_every_row_is_detected() -> None:
    assert all(has_likely_secret(row.text) for row in CREDENTIAL_ROWS)


# --- The keyword rule keeps the name and the separator, and stops where the value does. --------------------

KEEPS = [
    ("password: hunter2", "password: [REDACTED]"),
    ("password=Tr0ub4dor&3", "password=[REDACTED]&3"),
    ('password = "value with spaces"', 'password = "[REDACTED]"'),  # the miss: a quoted value with spaces
    ("todoist token - 'qpgv7zk3mx9wq2'", "todoist token - '[REDACTED]'"),  # the miss: the separator was taken
    ("api_key=abcd1234efgh", "api_key=[REDACTED]"),
    ("API-KEY: 'zz99yy88'", "API-KEY: '[REDACTED]'"),
    ("https://x.example/cb?access_token=abc123XYZ789&x=1", "https://x.example/cb?access_token=[REDACTED]&x=1"),
    ("?sv=2022-11-02&sig=k3Jf9aLq0ZP2xVb7Hs1nWm4TcYe8RdUo%2F%3D&se=2026", "?sv=2022-11-02&sig=[REDACTED]&se=2026"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "Authorization: Basic [REDACTED]"),
    ("Authorization: token Zk93nQ2mXb81LaPq", "Authorization: token [REDACTED]"),
    ("<password>s3cr3tP4ss!</password>", "<password>[REDACTED]</password>"),
    ("mysql -u root --password=R00tPassw0rd db", "mysql -u root --password=[REDACTED] db"),
    ("the password is Tr0ub4dor3x", "the password is [REDACTED]"),
    (
        "Server=db;Database=app;User Id=app;Password=N0tS0Secret9;",
        "Server=db;Database=app;User Id=app;Password=[REDACTED];",
    ),
    (
        "AccountKey=" + "Ab3" * 29 + "c==;EndpointSuffix=core.windows.net",
        "AccountKey=[REDACTED];EndpointSuffix=core.windows.net",
    ),
]


@pytest.mark.parametrize(("text", "expected"), KEEPS)
def test_the_value_goes_the_name_stays(text: str, expected: str) -> None:
    result = sanitize_text(text)
    assert result.value == expected
    assert result.report.text_redactions >= 1


def test_the_spec_rule_took_the_separator_and_left_the_value() -> None:
    # safety.md's shape 3 on the same texts: kept here as the record of what the extended rule fixes.
    assert sanitize_text("todoist token - 'qpgv7zk3mx9wq2'", SPEC).value == "todoist [REDACTED] 'qpgv7zk3mx9wq2'"
    assert sanitize_text('password = "value with spaces"', SPEC).value == '[REDACTED] with spaces"'


NEVER_CROSSES = [
    "access token:\n\n`doctl`",
    "password:\nhunter2xyz9",
    "export API_KEY=\nnext_line_value_123",
    "token\n  abcdef123456",
]


@pytest.mark.parametrize("text", NEVER_CROSSES)
def test_the_rule_never_crosses_a_line_break(text: str) -> None:
    assert sanitize_text(text).value == text


LEFT_ALONE = [
    "password: ${DB_PASSWORD}",
    "api_key: {{ api_key }}",
    "token = <your-token>",
    "export GITHUB_TOKEN=$TOKEN",
    "secret: %SECRET%",
    "password = os.environ['DB_PASSWORD']",
    "password = self.password",
    "token: str = settings.API_TOKEN",
    "api_key = get_api_key()",
    "password: ********",
    "password: xxxxxxxx",
    "password=",
    'password: ""',
    "password: true",
    "password_hint: Use at least 12 characters",
    'password_label: "Enter your password"',
    'password: "Enter your password"',
    "token_type: bearer",
    "max_tokens: 4096",
    "next_token=eyJ1c2VyIjoiYSJ9Cg",
    "secrets: inherit",
    "token=abc&x=1",
    "password: changeme",
    "--password-stdin",
    "password_file: /run/secrets/db_password",
    "token: ~/.config/gh/token",
    "api key: s3cr3t!",
    "ssh_key: id_ed25519.pub",
]


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_placeholders_code_and_labels_are_not_values(text: str) -> None:
    assert sanitize_text(text).value == text


def test_one_value_one_redaction_whatever_saw_it() -> None:
    result = sanitize_text("api_key=sk-" + draw(random.Random(1), ALNUM, 40))
    assert (result.value, result.report.text_redactions) == ("api_key=[REDACTED]", 1)


# --- URLs and DSNs. ------------------------------------------------------------------------------------


URLS = [
    ("postgres://u:p@h/db", "postgres://u:[REDACTED]@h/db"),
    ("https://user:pass@host", "https://user:[REDACTED]@host"),
    ("redis://:hunter2@cache:6379", "redis://:[REDACTED]@cache:6379"),
    ("see mongodb+srv://app:Zx9%40q@c0.example.net/db", "see mongodb+srv://app:[REDACTED]@c0.example.net/db"),
    (
        "https://x-access-token:ghs_" + "a1B2" * 9 + "@github.com/o/r",
        "https://x-access-token:[REDACTED]@github.com/o/r",
    ),
]


@pytest.mark.parametrize(("text", "expected"), URLS)
def test_a_url_keeps_everything_but_its_password(text: str, expected: str) -> None:
    assert sanitize_text(text).value == expected


@pytest.mark.parametrize(
    "text",
    [
        "mysql://{{user}}:{{password}}@{{host}}/db",
        "postgres://user:${DB_PASSWORD}@db/app",
        "amqp://<user>:<password>@rabbit",
        "https://user:****@host",
        "`rsql --url {{postgresql://user:pass@localhost/mydb}}`",
        "https://user@host/path",
        "ssh://git@github.com:org/repo.git",
        "https://example.com/a:b@c",
    ],
)
def test_a_template_url_or_one_without_a_password_is_left_alone(text: str) -> None:
    assert sanitize_text(text).value == text


# --- Private keys. -------------------------------------------------------------------------------------


def test_an_unterminated_block_is_redacted_to_the_end_of_its_body() -> None:
    text = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx9\nabcdef0123+/=\nThe end of the note"
    assert sanitize_text(text).value == "key:\n[REDACTED_PRIVATE_KEY]\nThe end of the note"
    assert sanitize_text(text, SPEC).value == text  # the spec's miss


def test_an_encrypted_pem_keeps_nothing_of_its_headers_or_body() -> None:
    text = (
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,8A2F\n\n"
        "MIIEpAIBAAKCAQEAx9\n-----END RSA PRIVATE KEY-----"
    )
    result = sanitize_text(text)
    assert (result.value, result.report.blocked_secret_hits) == ("[REDACTED_PRIVATE_KEY]", 1)


def test_two_blocks_do_not_swallow_the_text_between_them() -> None:
    first = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n"  # truncated
    second = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----"
    result = sanitize_text(f"{first}keep me\n{second}")
    assert result.value == "[REDACTED_PRIVATE_KEY]\nkeep me\n[REDACTED_PRIVATE_KEY]"
    assert result.report.blocked_secret_hits == 2


def test_a_public_key_or_certificate_is_not_a_private_key() -> None:
    text = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----"
    assert sanitize_text(text).value == text
