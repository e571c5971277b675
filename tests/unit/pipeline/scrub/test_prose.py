"""Prose stays prose: documentation, code and configuration that mention secrets without holding one come
out of the extended rules unchanged.

The rows are written here in the styles the scrubber meets (command references with `{{placeholders}}`,
READMEs, code, configuration templates, i18n files, logs with numbers), each labelled by what it tests.
Under the spec's rules many of them are redacted; that is the accepted false positive the extended rules
remove.
"""

from __future__ import annotations

import pytest

from pipeline.scrub import Policy, has_likely_secret, sanitize_text
from pipeline.scrub.words import is_ordinary, is_word, vocabulary
from tests.unit.pipeline.scrub.test_tables import Labelled, misses, well_formed

SPEC = Policy.spec_compatible()

PROSE: dict[str, list[str]] = {
    "sentence": [
        "Retrieve the secret from the vault before the deploy.",
        "Create an access token for the registry and store it safely.",
        "Log in with your password using the web form.",
        "The token is used to authenticate to a package registry.",
        "Rotate the secret immediately using a Lambda function.",
        "a bearer bond matured; the ring bearer walked down the aisle",
        "Bearer tokens are sent in the Authorization header.",
        "Passwords must be at least 12 characters long.",
        "the secret is out",
        "Set the password for the keystore, then the key password.",
        "Use a passphrase you can remember.",
        "The API key and the client secret are on the settings page.",
        "Tokenizers split text into tokens; the tokenizer is fast.",
        "Press any key to continue, or the monkey key on the keyboard.",
        "The author bypassed the authentication step when passing the test.",
        "Docker secrets and Kubernetes secrets are mounted as files.",
        "Password protect the server and remember the password for future downloads.",
        "Enter the secret key shown on the screen when asked.",
        "access token:\n\nThen run the command below.",
        "Authorization: see the section on tokens.",
    ],
    "command_reference": [
        "`aws sso get-role-credentials --account-id {{account}} --role-name {{role}} --access-token {{token}}`",
        "`docker login {{[-u|--username]}} {{username}} {{[-p|--password]}} {{password}} {{server}}`",
        '`echo "{{password}}" | docker login --username {{username}} --password-stdin`',
        "`mysql -u {{user}} --password={{password}} {{database}}`",
        "`curl -H 'Authorization: Bearer {{token}}' {{https://api.example.com}}`",
        "`gh auth login --with-token < {{path/to/token.txt}}`",
        "`aws secretsmanager get-secret-value --secret-id {{name|arn}} --version-stage {{version}}`",
        "`ansible-vault create --vault-password-file {{path/to/password_file}} {{path/to/vault_file}}`",
        "`kubectl create secret generic {{name}} --from-literal={{key}}={{value}}`",
        "`aider --model {{model_name}} --api-key {{your_api_key}}`",
        "`openssl rsa -in {{key.pem}} -passin pass:{{password}}`",
        "`psql postgresql://{{user}}:{{password}}@{{host}}/{{db}}`",
        "`git clone https://{{username}}:{{token}}@github.com/{{owner}}/{{repo}}.git`",
        "`htpasswd -b {{path/to/file}} {{username}} {{password}}`",
        "`vault kv get -field={{field}} secret/{{path}}`",
        '`ssh-keygen -t ed25519 -C "{{email}}" -f ~/.ssh/id_ed25519`',
        "`gcloud auth configure-docker`",
        "`sf force:auth:web:login --setalias {{organization}}`",
        '`prowler azure --browser-auth --tenant-id "{{XXXXXXXX}}"`',
        "`chpass -a {{username:encrypted_password:uid:gid:...}}`",
        "Note: pass `--connect URI` to the commands.",
        "- Create a root CA (append `--no-password --insecure` to skip key password protection):",
    ],
    "configuration_template": [
        "password: ${DB_PASSWORD}",
        "api_key: {{ api_key }}",
        "token = <your-token>",
        "export GITHUB_TOKEN=$TOKEN",
        "client_secret: ${CLIENT_SECRET:-}",
        "secret: %SECRET%",
        "password: ********",
        'password: ""',
        "password: changeme",
        "password_file: /run/secrets/db_password",
        "token_type: bearer",
        "max_tokens: 4096",
        "secrets: inherit",
        "PasswordAuthentication no",
        "PermitRootLogin prohibit-password",
        "auth: true",
        "ssh_key: id_ed25519.pub",
    ],
    "code": [
        "password = input('Password: ')",
        "if token is None:\n    raise AuthError('missing token')",
        "token = request.headers.get('X-Token')",
        "def get_secret(name: str) -> str:",
        "secret_name = 'prod/db'",
        "self.password_hasher = Argon2Hasher()",
        "password = os.environ['DB_PASSWORD']",
        "api_key = settings.API_KEY",
        "const token = await getToken();",
        "password: str = Field(min_length=12)",
        "api_key_header = APIKeyHeader(name='X-API-Key')",
        "with open(key_path) as key_file:",
        "for token in tokens: counts[token] += 1",
        "authorization_header = f'Bearer {token}'",
    ],
    "i18n": [
        "password_placeholder: Enter your password",
        "forgot_password: Forgot your password?",
        'password_hint: "At least 8 characters"',
        'password: "Password"',
        'token_expired: "Your session token has expired"',
    ],
    "numbers": [
        "order 2503622437 shipped on 2024-01-15",
        "ts=1700000000000 ms=1712345678123",
        "ports 8000-8999, pages 1200-1450",
        "host 192.168.178.100 netmask 255.255.255.0",
        "python 3.11.7 and node v20.11.1",
        "sizes 4096 8192 16384 32768 65536",
        "about 1 000 000 rows",
        "commit 4f2c9e1a7b3d5f6e8c0a1b2d3e4f5a6b7c8d9e0f",
        "uuid 3f2504e0-4f89-41d3-9a0c-0305e82c3301",
        "the list 20 0 50 50 70 100",
        "ports 443 587 993, range 100 200 300, sizes 128 256 512 1024",
        "the table has 123 456 789 rows; Manila has 13 000 000 people",
        "invoice no. 752-174-888 was paid; İstanbul build 2.8.1234 shipped 2024-01-15",
    ],
    "links": [
        "More information: <https://docs.docker.com/reference/cli/docker/secret/>.",
        "https://ots.example/secret/create",
        "git@github.com:owner/repo.git and ssh://git@example.com:22/repo",
        "https://example.com/a:b@c and mailto:ana@example.com",
    ],
}
PROSE_ROWS = [Labelled(f"prose:{kind}", text) for kind, texts in PROSE.items() for text in texts]


def test_the_table_is_well_formed() -> None:
    well_formed(PROSE_ROWS)


def test_every_prose_row_comes_out_unchanged() -> None:
    assert misses(PROSE_ROWS) == []


def test_no_prose_row_is_taken_for_a_secret() -> None:
    assert [row.text for row in PROSE_ROWS if has_likely_secret(row.text)] == []


def test_the_spec_rules_redacted_much_of_it() -> None:
    changed = [row for row in PROSE_ROWS if sanitize_text(row.text, SPEC).value != row.text]
    assert len(changed) > len(PROSE_ROWS) // 4


IN_A_SENTENCE = [
    ("the token is Zk93nQ2mXb81LaPq for now", "the token is [REDACTED] for now"),
    ("my password is Tr0ub4dor3x", "my password is [REDACTED]"),
    ("secret abc123XYZ789def in the log", "secret [REDACTED] in the log"),
]


@pytest.mark.parametrize(("text", "expected"), IN_A_SENTENCE)
def test_a_random_looking_value_in_a_sentence_is_still_a_secret(text: str, expected: str) -> None:
    assert sanitize_text(text).value == expected


# --- The word list behind "ordinary word". ----------------------------------------------------------------


def test_the_word_list_is_compact_and_lower_case() -> None:
    words = vocabulary()
    assert 5_000 < len(words) < 20_000
    assert all(w.isascii() and w.isalpha() and w.islower() for w in words)


@pytest.mark.parametrize(
    ("value", "ordinary"),
    [
        ("authentication", True),
        ("Authentication", True),
        ("AUTHENTICATION", True),
        ("using", True),
        ("credentials", True),
        ("read-only", True),
        ("access_token", True),
        ("getToken", True),
        ("PasswordAuthentication", True),
        ("plainwordsecret", False),
        ("qpgvzxkemt", False),
        ("password123", False),
        ("hunter2", False),
        ("ToKeN", False),
        ("", False),
    ],
)
def test_ordinary_words_and_compounds(value: str, ordinary: bool) -> None:
    assert is_ordinary(value) is ordinary


def test_a_word_is_one_word_in_one_case() -> None:
    assert is_word("token") and is_word("Tokens") and not is_word("token_value") and not is_word("tökén")
