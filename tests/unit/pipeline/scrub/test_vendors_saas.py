"""Developer and SaaS formats (`vendors_saas`, and the family's rows kept in `vendors`): a labelled table of generated
tokens, and their near misses.

Each generator draws a token from its vendor's documented shape (prefix, alphabet, length, structure) with a seeded
random source. A token with a literal is written in the neutral contexts of `test_vendors`; a token placed by its
vendor's name is written beside the name and a credential word, never where the keyword rule would take it
(`NAMED_CONTEXTS`), so a row is caught by its format. `NEAR_MISSES` holds, for every format, text of the same
shape that must come out unchanged: without the name, or the name far away, a wrong prefix or length, a
placeholder, a sentence naming the vendor.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable, Mapping

import pytest

from pipeline.scrub import Policy, has_likely_secret, sanitize_text
from pipeline.scrub.needles import FoldedText
from pipeline.scrub.text_stages import sanitize_fully
from pipeline.scrub.vendors import VENDOR_FORMATS, find_vendor_tokens
from pipeline.scrub.vendors_saas import NAMED_FORMATS, SAAS_FORMATS, VendorNames
from tests.unit.pipeline.scrub.test_tables import (
    ALNUM,
    BASE64,
    HEX,
    LOWER_DIGITS,
    UPPER_DIGITS,
    URLSAFE,
    Labelled,
    draw,
    misses,
    well_formed,
)
from tests.unit.pipeline.scrub.test_vendors import CONTEXTS

Sample = tuple[str, tuple[str, ...]]  # (the token as it is written, the parts that must not survive)
Generator = Callable[[random.Random], Sample]

SPEC = Policy.spec_compatible()
# The family's rows that `vendors` keeps among the formats of their kind, with the shapes issue 31 added.
FAMILY_ROWS_IN_VENDORS = ("hashicorp_vault_token", "atlassian_token", "octopus_deploy_key", "shopify_token")
ROUTER = next(f for f in SAAS_FORMATS if isinstance(f, VendorNames))
NAMED = {f.name for f in NAMED_FORMATS}
NEAR = {f.name: f.near for f in NAMED_FORMATS}


def _generated(rng: random.Random, alphabet: str, size: int) -> str:
    """`size` characters of `alphabet` holding a digit, an upper-case and a lower-case letter where it has them,
    as a generated token almost always does."""
    classes = [c for c in (string.digits, string.ascii_uppercase, string.ascii_lowercase) if set(c) & set(alphabet)]
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(size))
        if all(set(c) & set(value) for c in classes):
            return value


def _token(make: Callable[[random.Random], str]) -> Generator:
    return lambda rng: (token := make(rng), (token,))


def _b64url(value: Mapping[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


# --- Tokens with a literal, in neutral contexts ------------------------------------------------------------------


def _vault_namespaced(rng: random.Random) -> Sample:
    # A token made in a namespace ends in `.` and the namespace's id; the whole of it goes.
    token = f"hvs.{_generated(rng, ALNUM, 24)}.{_generated(rng, ALNUM, 5)}"
    return token, (token,)


def _atlassian(prefix: str) -> Generator:
    # About 190 characters: the prefix, base64url, `=` and an 8-hex-digit checksum.
    return _token(lambda r: f"{prefix}{draw(r, URLSAFE, 170)}={draw(r, '0123456789ABCDEF', 8)}")


def _airtable_oauth(refresh: bool) -> Generator:
    def make(rng: random.Random) -> str:
        payload = {"userId": "usr" + draw(rng, ALNUM, 14), "secret": draw(rng, HEX, 64)}
        kind = "refresh." if refresh else ""
        return f"oaa{draw(rng, ALNUM, 14)}.v1.{kind}{_b64url(payload)}.{draw(rng, HEX, 64)}"

    return _token(make)


def _alchemy_url(rng: random.Random) -> Sample:
    key = _generated(rng, URLSAFE, 32)
    chain = rng.choice(["eth-mainnet", "eth-sepolia", "polygon-mainnet", "arb-mainnet", "base-mainnet"])
    path = rng.choice(["v2", "nft/v3"])
    return f"https://{chain}.g.alchemy.com/{path}/{key}", (key,)


SAMPLES: dict[str, list[Generator]] = {
    "hashicorp_vault_token": [
        _token(lambda r: r.choice(["hvs.", "hvb.", "hvr."]) + _generated(r, ALNUM, 24)),  # the documented body
        _token(lambda r: "hvs.CAESI" + draw(r, URLSAFE, 91)),  # a server-side consistent token
        _vault_namespaced,
    ],
    "atlassian_token": [_atlassian("ATATT3xFfGF0"), _atlassian("ATCTT3xFfGN0"), _atlassian("ATSTT3xFfGF0")],
    "octopus_deploy_key": [_token(lambda r: "API-" + _generated(r, UPPER_DIGITS, r.choice([26, 28, 29, 32])))],
    "shopify_token": [
        _token(lambda r: r.choice(["shpua_", "shptka_"]) + draw(r, HEX, 32)),
        _token(lambda r: "shprt_" + draw(r, HEX, 32)),
    ],
    "bitbucket_app_password": [
        _token(lambda r: "ATBB" + _generated(r, ALNUM, 24) + draw(r, "0123456789ABCDEF", 8)),  # a CRC32 at the end
        _token(lambda r: "ATBB" + _generated(r, ALNUM, 32)),
    ],
    "airtable_oauth_token": [_airtable_oauth(False), _airtable_oauth(True)],
    "alchemy_rpc_url_key": [_alchemy_url],
}


# --- Tokens placed by a name ---------------------------------------------------------------------------------------


def _salesforce_access(rng: random.Random) -> str:
    return f"00D{draw(rng, ALNUM, 12)}!A{rng.choice('QR')}{_generated(rng, ALNUM + '._', 94)}"


def _brandfetch(rng: random.Random) -> str:
    while True:
        key = base64.b64encode(rng.randbytes(32)).decode()
        if all(set(c) & set(key) for c in (string.digits, string.ascii_uppercase, string.ascii_lowercase)):
            return key


NAMED_SAMPLES: dict[str, tuple[tuple[str, ...], list[Generator]]] = {
    "hashicorp_vault_legacy_token": (
        ("Vault", "vault"),
        [
            _token(lambda r: r.choice(["s.", "r."]) + _generated(r, ALNUM, 24)),
            _token(lambda r: f"s.{_generated(r, ALNUM, 24)}.{_generated(r, ALNUM, 5)}"),
            _token(lambda r: "b.AAAAAQ" + _generated(r, URLSAFE, 130)),
        ],
    ),
    "atlassian_api_token_legacy": (
        ("Jira", "Confluence", "Atlassian"),
        [_token(lambda r: _generated(r, ALNUM, 24)), _token(lambda r: "q" + _generated(r, LOWER_DIGITS, 23))],
    ),
    "atlassian_data_center_pat": (("Jira", "Confluence", "Bitbucket"), [_token(lambda r: _generated(r, BASE64, 44))]),
    "tableau_pat": (
        ("Tableau",),
        [_token(lambda r: _generated(r, BASE64, 22) + "==:" + _generated(r, ALNUM, 32))],
    ),
    "salesforce_access_token": (
        ("Salesforce",),
        [_token(_salesforce_access), _token(lambda r: f"00{draw(r, ALNUM, 13)}!{_generated(r, ALNUM + '._', 96)}")],
    ),
    "salesforce_refresh_token": (("Salesforce",), [_token(lambda r: "5Aep861" + _generated(r, ALNUM + "._", 80))]),
    "airtable_pat": (("Airtable",), [_token(lambda r: f"pat{_generated(r, ALNUM, 14)}.{draw(r, HEX, 64)}")]),
    "airtable_api_key_legacy": (("Airtable",), [_token(lambda r: "key" + _generated(r, ALNUM, 14))]),
    "smartsheet_token": (
        ("Smartsheet",),
        [_token(lambda r: _generated(r, ALNUM, 37))],
    ),
    "duo_integration_key": (("Duo",), [_token(lambda r: "DI" + _generated(r, UPPER_DIGITS, 18))]),
    "duo_secret_key": (("Duo",), [_token(lambda r: _generated(r, ALNUM, 40))]),
    "alchemy_api_key": (("Alchemy",), [_token(lambda r: _generated(r, URLSAFE, 32))]),
    "scrapingbee_api_key": (("ScrapingBee",), [_token(lambda r: _generated(r, UPPER_DIGITS, 80))]),
    "brandfetch_api_key": (("Brandfetch",), [_token(_brandfetch), _token(lambda r: _generated(r, ALNUM, 40))]),
    "accuweather_api_key": (
        ("AccuWeather",),
        [
            _token(lambda r: _generated(r, ALNUM, 32)),
            _token(lambda r: _generated(r, ALNUM, 16) + "%" + _generated(r, ALNUM, 18)),
            _token(lambda r: f"zpka_{draw(r, HEX, 32)}_{draw(r, HEX, 8)}"),
        ],
    ),
}

# The vendor's name within reach of the value, a credential word in the text (the named formats are searched
# behind one), and nothing the keyword rule takes: the word is on another line, or names no value.
NAMED_CONTEXTS = (
    "{vendor} (see the key rotation notes)\nexport CONFIG_VALUE={value}",
    "# {vendor} token, rotated monthly\nvalue: '{value}'\n",
    '{{"service": "{vendor}", "kind": "secret", "value": "{value}"}}',
    "{vendor}: pasted from the auth page\n`{value}`",
    "the {vendor} key is `{value}`.",
)
PER_GENERATOR = 3


def saas_rows(seed: int = 31) -> list[Labelled]:
    """The labelled table: every generator, in every context, a few draws each."""
    rng = random.Random(seed)
    rows = []
    for name, generators in SAMPLES.items():
        for generator in generators:
            for context in CONTEXTS:
                for _ in range(PER_GENERATOR):
                    written, secrets = generator(rng)
                    rows.append(Labelled(f"vendor:{name}", context.format(written), secrets))
    for name, (vendors, generators) in NAMED_SAMPLES.items():
        for generator in generators:
            for context in NAMED_CONTEXTS:
                for _ in range(PER_GENERATOR):
                    written, secrets = generator(rng)
                    text = context.format(vendor=rng.choice(vendors), value=written)
                    rows.append(Labelled(f"vendor:{name}", text, secrets))
    return rows


SAAS_ROWS = saas_rows()


# --- Near misses ---------------------------------------------------------------------------------------------------

# Prose long enough to carry a value out of reach of a name, naming no vendor and no credential.
_FILLER = "The nightly job copies the reports to the archive and mails a summary to the team. " * 5


def _far(vendor: str, value: str) -> str:
    """The value beyond reach of the vendor's name, with a credential word beside the name."""
    return f"{vendor} token notes.\n{_FILLER}\nvalue: '{value}'"


def _near_misses(rng: random.Random) -> list[tuple[str, str]]:
    skey, pat = _generated(rng, ALNUM, 40), _generated(rng, BASE64, 44)
    return [
        # Vault: a placeholder, a short body, an identifier, and the same shape far from the word.
        ("hashicorp_vault_token", "VAULT_ADDR=https://vault.example.com vault login hvs.<token>"),
        ("hashicorp_vault_token", f"the id hvs.{draw(rng, ALNUM, 12)} is truncated"),
        ("hashicorp_vault_legacy_token", "vault token lookup s.<token>"),
        ("hashicorp_vault_legacy_token", "Vault tokens look like s.xxxxxxxxxxxxxxxxxxxxxxxx in old docs."),
        ("hashicorp_vault_legacy_token", "the vault token field uses s.getElementsByTagNameXYZ to read it"),
        ("hashicorp_vault_legacy_token", f"token notes: the file s.{_generated(rng, ALNUM, 24)} was moved"),
        ("hashicorp_vault_legacy_token", _far("Vault", "s." + _generated(rng, ALNUM, 24))),
        # Atlassian cloud: cut short, or named only.
        ("atlassian_token", f"a token starts ATATT3xFfGF0{draw(rng, URLSAFE, 20)} (truncated)"),
        ("atlassian_token", "Atlassian API tokens start with ATATT3 and vary in length."),
        ("bitbucket_app_password", f"ATBB{draw(rng, ALNUM, 20)} is too short for an app password"),
        ("bitbucket_app_password", "Bitbucket app passwords start with ATBB; create one under Personal settings."),
        ("bitbucket_app_password", "password: ATBB<your-app-password>"),
        # Legacy cloud tokens: an account id is 24 hex digits; the shape far from the name.
        ("atlassian_api_token_legacy", f'Jira user (auth) "accountId": "{draw(rng, HEX, 24)}"'),
        ("atlassian_api_token_legacy", _far("Confluence", _generated(rng, ALNUM, 24))),
        ("atlassian_api_token_legacy", "Jira token: the JiraIssueTrackerCloudClient class (24 letters)"),
        # Data Center PATs: the shape without a product's name, the name far away, a placeholder.
        ("atlassian_data_center_pat", f"the token digest was {pat} on every mirror"),
        ("atlassian_data_center_pat", _far("Jira", pat)),
        ("atlassian_data_center_pat", "curl -H 'Authorization: Bearer <personal-access-token>' https://jira.example.com"),
        ("atlassian_data_center_pat", "Create a Confluence personal access token under Profile > Access Tokens."),
        # Tableau.
        ("tableau_pat", f"token cache {_generated(rng, BASE64, 22)}==:{_generated(rng, ALNUM, 32)} (no product)"),
        ("tableau_pat", _far("Tableau", _generated(rng, BASE64, 22) + "==:" + _generated(rng, ALNUM, 32))),
        ("tableau_pat", 'Tableau sign-in: {"personalAccessTokenName": "ci", "personalAccessTokenSecret": "<secret>"}'),
        # Octopus: an identifier in capitals, a short key, a placeholder.
        ("octopus_deploy_key", "Set the header X-Octopus-ApiKey to API-YOUR-KEY; API-GATEWAYCONFIGURATIONSETTINGS."),
        ("octopus_deploy_key", f"octopus key API-{_generated(rng, UPPER_DIGITS, 20)} was truncated"),
        # Shopify: one digit short, a prefix it does not issue.
        ("shopify_token", f"use shpua_{draw(rng, HEX, 31)} for the deploy"),
        ("shopify_token", f"use shpxx_{draw(rng, HEX, 32)} for the deploy"),
        ("shopify_token", "Theme Access passwords start with shptka_ and are shown once."),
        # Salesforce: an org id alone, a session part too short, a refresh-like value with no name.
        ("salesforce_access_token", "access token for org 00Dxx0000001gPLEAY: see the setup page"),
        ("salesforce_access_token", f"the session 00D{draw(rng, ALNUM, 12)}!{draw(rng, ALNUM, 20)} ended (auth log)"),
        ("salesforce_access_token", "Salesforce access tokens begin with the org id, 00D..., then a `!`."),
        ("salesforce_refresh_token", f"token notes: {'5Aep861' + _generated(rng, ALNUM, 80)} (no vendor)"),
        ("salesforce_refresh_token", _far("Salesforce", "5Aep861" + _generated(rng, ALNUM, 80))),
        # Airtable: a path, a hex part one short, a version it does not issue.
        ("airtable_pat", "Airtable token file: path/to/the/tokens/file.json"),
        ("airtable_pat", f"Airtable id pat{_generated(rng, ALNUM, 14)}.{draw(rng, HEX, 63)} (cut), see the token page"),
        ("airtable_pat", _far("Airtable", f"pat{_generated(rng, ALNUM, 14)}.{draw(rng, HEX, 64)}")),
        ("airtable_api_key_legacy", "Airtable key: base appAbCdEfGh1234567, table tblAbCdEfGh1234567"),
        ("airtable_api_key_legacy", "Airtable key: the keyboardShortcutsTab setting"),
        ("airtable_api_key_legacy", _far("Airtable", "key" + _generated(rng, ALNUM, 14))),
        ("airtable_oauth_token", f"use oaa{draw(rng, ALNUM, 14)}.v2.{draw(rng, URLSAFE, 40)} for the deploy"),
        ("airtable_oauth_token", "Airtable OAuth access tokens look like oaa<id>.v1.<payload>.<signature>."),
        # Smartsheet.
        ("smartsheet_token", f"token notes: {_generated(rng, ALNUM, 37)} (no vendor)"),
        ("smartsheet_token", _far("Smartsheet", _generated(rng, ALNUM, 37))),
        ("smartsheet_token", "Smartsheet token: Authorization: Bearer <access-token>"),
        ("smartsheet_token", f"Smartsheet token guide: https://app.smartsheet.com/sheets/{_generated(rng, ALNUM, 37)}"),
        # Duo: capitals with no digit, a commit hash, the shapes far from the name.
        ("duo_integration_key", "Duo key setting DIAGNOSTICSENABLEDXX stays on"),
        ("duo_integration_key", _far("Duo", "DI" + _generated(rng, UPPER_DIGITS, 18))),
        ("duo_secret_key", f"Duo key rotation landed in commit {draw(rng, HEX, 40)}"),
        ("duo_secret_key", _far("Duo", skey)),
        ("duo_secret_key", "Copy the Duo integration key, secret key and API hostname from the Admin Panel."),
        # Alchemy: the demo key, a placeholder, an identifier with no digit.
        ("alchemy_rpc_url_key", "RPC_URL=https://eth-mainnet.g.alchemy.com/v2/demo"),
        ("alchemy_rpc_url_key", "https://eth-mainnet.g.alchemy.com/v2/your-api-key"),
        ("alchemy_api_key", "the Alchemy key class AlchemyProviderConfigurationXY is `final`"),
        ("alchemy_api_key", _far("Alchemy", _generated(rng, URLSAFE, 32))),
        # ScrapingBee, Brandfetch, AccuWeather.
        ("scrapingbee_api_key", f"ScrapingBee key {_generated(rng, UPPER_DIGITS, 79)} (one short)"),
        ("scrapingbee_api_key", "https://app.scrapingbee.com/api/v1/?api_key=YOUR-API-KEY&url=https://example.com"),
        ("brandfetch_api_key", "Brandfetch logo: https://cdn.brandfetch.io/domain/example.com?c=BRANDFETCH_CLIENT_ID"),
        ("brandfetch_api_key", _far("Brandfetch", base64.b64encode(rng.randbytes(32)).decode())),
        ("brandfetch_api_key", f'<script src="cdn.brandfetch.io/auth.js" integrity="sha256-{_brandfetch(rng)}">'),
        ("accuweather_api_key", f"AccuWeather location key 349727, cache id {draw(rng, HEX, 32)}"),
        ("accuweather_api_key", _far("AccuWeather", _generated(rng, ALNUM, 32))),
        ("accuweather_api_key", "AccuWeather APIs take the API key in the Authorization header."),
    ]  # fmt: skip


NEAR_MISSES = _near_misses(random.Random(32))
_IDS = [f"{name}-{i}" for i, (name, _) in enumerate(NEAR_MISSES)]


# --- The table -----------------------------------------------------------------------------------------------------


def test_the_table_is_well_formed_and_covers_every_format() -> None:
    well_formed(SAAS_ROWS)
    names = {f.name for f in (*SAAS_FORMATS, *NAMED_FORMATS)} - {ROUTER.name} | set(FAMILY_ROWS_IN_VENDORS)
    assert len(names) == len(SAAS_FORMATS) - 1 + len(NAMED_FORMATS) + len(FAMILY_ROWS_IN_VENDORS)
    assert {row.label for row in SAAS_ROWS} == {f"vendor:{name}" for name in names}
    assert set(SAMPLES) | set(NAMED_SAMPLES) == names
    assert {name for name, _ in NEAR_MISSES} == names


def test_the_named_formats_are_one_entry_of_the_table() -> None:
    # Searched once per text behind credential words the shortcut already looks for, so no vendor's name costs
    # every text a search.
    assert [f for f in SAAS_FORMATS if f.scan] == [ROUTER]
    assert {m.name for _, members in ROUTER.by_name for m in members} == NAMED
    assert all(f.scan and f.near for f in NAMED_FORMATS)
    assert sum(f is ROUTER for f in VENDOR_FORMATS) == 1


def test_every_row_is_redacted() -> None:
    assert misses(SAAS_ROWS) == []


def test_every_row_is_detected() -> None:
    assert [row.text for row in SAAS_ROWS if not has_likely_secret(row.text)] == []


@pytest.mark.parametrize("name", sorted(set(SAMPLES) | set(NAMED_SAMPLES)))
def test_each_sample_is_found_by_its_format(name: str) -> None:
    # By the formats, not the keyword rule: the span found is the secret itself.
    for row in [r for r in SAAS_ROWS if r.label == f"vendor:{name}"]:
        spans = find_vendor_tokens(FoldedText(row.text))
        assert all(secret in [row.text[s:e] for s, e in spans] for secret in row.secrets), row.text


@pytest.mark.parametrize(("name", "text"), NEAR_MISSES, ids=_IDS)
def test_a_near_miss_is_left_alone(name: str, text: str) -> None:
    assert sanitize_text(text).value == text
    assert not has_likely_secret(text)


def test_a_named_value_far_from_its_name_is_not_searched() -> None:
    # The reach is the format's own: a value just inside is found, the same value just outside is not.
    rng = random.Random(5)
    for name, (vendors, generators) in NAMED_SAMPLES.items():
        if name == "salesforce_access_token":
            continue  # placed by its own prefix, `00D`: never far from it
        value, _ = generators[0](rng)
        head = f"{vendors[0]} token\n"
        reach = len(head.split()[0]) + NEAR[name]  # from the name's first character
        inside = head + "x " * ((reach - len(head) - len(value) - 2) // 2) + "\n" + value
        outside = head + "x " * ((reach - len(head) + 2) // 2) + "\n" + value
        assert len(inside) <= reach < outside.index(value), name
        assert value not in sanitize_text(inside).value, name
        assert sanitize_text(outside).value == outside, name


def test_a_named_value_needs_a_credential_word_in_the_text() -> None:
    # Behind no word the search is not opened: the shortcut, which looks for those words, must agree.
    value = _generated(random.Random(6), ALNUM, 40)
    text = f"Duo\n{value}"
    assert sanitize_text(text).value == text
    assert value not in sanitize_text(f"Duo key\n{value}").value


# --- Markers, the shortcut, and the spec's rules ---------------------------------------------------------------


def test_a_token_is_one_redaction_and_the_context_stays() -> None:
    rng = random.Random(7)
    password = "ATBB" + _generated(rng, ALNUM, 24) + draw(rng, "0123456789ABCDEF", 8)
    result = sanitize_text(f"export CONFIG_VALUE={password} # ci")
    assert (result.value, result.report.text_redactions) == ("export CONFIG_VALUE=[REDACTED] # ci", 1)
    skey = _generated(rng, ALNUM, 40)
    result = sanitize_text(f"the Duo key is `{skey}`.")
    assert (result.value, result.report.text_redactions) == ("the Duo key is `[REDACTED]`.", 1)


def test_a_namespaced_vault_token_goes_whole() -> None:
    token, _ = _vault_namespaced(random.Random(8))
    assert sanitize_text(f"use {token} for the deploy").value == "use [REDACTED] for the deploy"


def test_a_salesforce_token_after_bearer_loses_its_session_part_too() -> None:
    token = _salesforce_access(random.Random(9))
    result = sanitize_text(f"curl -H 'Authorization: Bearer {token}' https://acme.my.salesforce.com")
    assert result.value == "curl -H 'Authorization: Bearer [REDACTED][REDACTED]' https://acme.my.salesforce.com"


def test_the_alchemy_url_keeps_its_host() -> None:
    written, (key,) = _alchemy_url(random.Random(10))
    assert sanitize_text(f"RPC_URL={written}").value == f"RPC_URL={written.replace(key, '[REDACTED]')}"


def test_the_shortcut_agrees_with_the_full_path() -> None:
    for text in [row.text for row in SAAS_ROWS] + [text for _, text in NEAR_MISSES]:
        assert sanitize_text(text) == sanitize_fully(text, Policy()), text


def test_the_spec_rules_are_unchanged() -> None:
    # The formats are the default rules' only: safety.md's 18 shapes see none of these rows.
    assert [row.text for row in SAAS_ROWS if sanitize_text(row.text, SPEC).value != row.text] == []
    # After `Bearer ` the spec's shape takes what it always took, and no more.
    token = _salesforce_access(random.Random(9))
    text = f"Authorization: Bearer {token}"
    assert sanitize_text(text, SPEC).value == f"Authorization: Bearer [REDACTED]{token[15:]}"
