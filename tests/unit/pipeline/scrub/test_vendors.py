"""Vendor token formats (`vendors`): a labelled table of fake tokens of every format, in neutral contexts.

Each generator draws a token from the format's public description (prefix, alphabet, length) with a seeded
random source. The contexts name nothing secret (`CONFIG_VALUE=`, "use ... for"), so a row is caught by its
shape alone, not by the keyword rule.
"""

from __future__ import annotations

import base64
import json
import random
import re
import uuid
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.scrub import Policy, has_likely_secret, sanitize_text
from pipeline.scrub.needles import FoldedText
from pipeline.scrub.vendors import _MIN_TOKEN, VENDOR_FORMATS, VendorFormat, find_vendor_tokens
from pipeline.scrub.vendors_cloud import CLOUD_FORMATS
from pipeline.scrub.vendors_saas import SAAS_FORMATS
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

Sample = tuple[str, str]  # (the token as it is written, the part that must not survive)
Generator = Callable[[random.Random], Sample]


def _token(make: Callable[[random.Random], str]) -> Generator:
    return lambda rng: (token := make(rng), token)


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(n - 1))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _b64url(value: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    header = _b64url({"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"})
    payload = _b64url({"sub": _digits(rng, 10), "iat": rng.randint(1_600_000_000, 1_800_000_000)})
    return f"{header}.{payload}.{draw(rng, URLSAFE, 43)}"


def _unsigned_jwt(rng: random.Random) -> str:
    return f"{_b64url({'alg': 'none', 'typ': 'JWT'})}.{_b64url({'sub': _digits(rng, 8)})}."


def _slack_webhook(rng: random.Random) -> Sample:
    path = f"T{draw(rng, UPPER_DIGITS, 8)}/B{draw(rng, UPPER_DIGITS, 10)}/{draw(rng, ALNUM, 24)}"
    return f"https://hooks.slack.com/services/{path}", path


def _discord_webhook(rng: random.Random) -> Sample:
    secret = draw(rng, URLSAFE, 68)
    return f"https://discord.com/api/webhooks/{_digits(rng, 18)}/{secret}", secret


def _teams_webhook(rng: random.Random) -> Sample:
    path = f"{_uuid(rng)}@{_uuid(rng)}/IncomingWebhook/{draw(rng, HEX, 32)}/{_uuid(rng)}"
    return f"https://contoso.webhook.office.com/webhookb2/{path}", path


def _gcp_key_id(rng: random.Random) -> Sample:
    key_id = draw(rng, HEX, 40)
    return f'"private_key_id": "{key_id}"', key_id


# One generator per format, several where a format has spellings that differ in shape.
SAMPLES: dict[str, list[Generator]] = {
    "aws_access_key_id": [_token(lambda r: r.choice(["AKIA", "ASIA"]) + draw(r, UPPER_DIGITS, 16))],
    "google_api_key": [
        _token(lambda r: "AIza" + draw(r, URLSAFE, 35)),
        _token(lambda r: "AIza" + draw(r, URLSAFE, 34) + "-"),  # the miss: `\b` gave the `-` back
    ],
    "google_oauth_secret": [_token(lambda r: "GOCSPX-" + draw(r, URLSAFE, 28))],
    "google_oauth_access_token": [_token(lambda r: "ya29." + draw(r, URLSAFE, 120))],
    "google_oauth_refresh_token": [_token(lambda r: "1//0" + draw(r, URLSAFE, 90))],
    "gcp_private_key_id": [_gcp_key_id],
    "azure_ad_client_secret": [
        _token(lambda r: draw(r, ALNUM, 3) + str(r.randint(0, 9)) + "Q~" + draw(r, ALNUM + "_~.-", 34))
    ],
    "alibaba_access_key_id": [_token(lambda r: "LTAI" + draw(r, ALNUM, 20))],
    "tencent_secret_id": [_token(lambda r: "AKID" + draw(r, ALNUM, 32))],
    "digitalocean_token": [_token(lambda r: r.choice(["dop", "doo", "dor"]) + "_v1_" + draw(r, HEX, 64))],
    "databricks_token": [_token(lambda r: "dapi" + draw(r, HEX, 32))],
    "flyio_token": [_token(lambda r: "fo1_" + draw(r, URLSAFE, 43)), _token(lambda r: "fm2_" + draw(r, BASE64, 140))],
    "github_token": [_token(lambda r: "gh" + r.choice("pousr") + "_" + draw(r, ALNUM, 36))],
    "github_fine_grained": [_token(lambda r: "github_pat_" + draw(r, ALNUM, 22) + "_" + draw(r, ALNUM, 59))],
    "gitlab_token": [
        _token(lambda r: "glpat-" + draw(r, URLSAFE, 20)),
        _token(
            lambda r: (
                r.choice(["gldt", "glft", "glsoat", "glrt", "glimt", "glagent", "gloas", "glffct"])
                + "-"
                + draw(r, URLSAFE, 25)
            )
        ),
        _token(lambda r: "glptt-" + draw(r, HEX, 40)),
        _token(lambda r: "glcbt-" + draw(r, ALNUM, 2) + "_" + draw(r, URLSAFE, 20)),
    ],
    "gitlab_runner_registration": [_token(lambda r: "GR1348941" + draw(r, URLSAFE, 20))],
    "npm_token": [_token(lambda r: "npm_" + draw(r, ALNUM, 36))],
    "pypi_token": [_token(lambda r: "pypi-AgEIcHlwaS5vcmc" + draw(r, URLSAFE, 80))],
    "docker_hub_token": [_token(lambda r: r.choice(["dckr_pat_", "dckr_oat_"]) + draw(r, URLSAFE, 27))],
    "rubygems_token": [_token(lambda r: "rubygems_" + draw(r, HEX, 48))],
    "clojars_token": [_token(lambda r: "CLOJARS_" + draw(r, LOWER_DIGITS, 60))],
    "artifactory_token": [_token(lambda r: "AKCp" + draw(r, ALNUM, 69))],
    "sourcegraph_token": [_token(lambda r: "sgp_" + draw(r, HEX, 16) + "_" + draw(r, HEX, 40))],
    "octopus_deploy_key": [_token(lambda r: "API-" + draw(r, UPPER_DIGITS, 26))],
    "pulumi_token": [_token(lambda r: "pul-" + draw(r, HEX, 40))],
    "terraform_cloud_token": [_token(lambda r: draw(r, ALNUM, 14) + ".atlasv1." + draw(r, URLSAFE, 67))],
    "hashicorp_vault_token": [_token(lambda r: r.choice(["hvs.", "hvb."]) + draw(r, URLSAFE, 90))],
    "doppler_token": [_token(lambda r: "dp.pt." + draw(r, ALNUM, 43))],
    "age_secret_key": [_token(lambda r: "AGE-SECRET-KEY-1" + draw(r, UPPER_DIGITS, 58))],
    "onepassword_service_token": [_token(lambda r: "ops_eyJ" + draw(r, BASE64, 200))],
    "openshift_token": [_token(lambda r: "sha256~" + draw(r, URLSAFE, 43))],
    "harness_token": [_token(lambda r: f"pat.{draw(r, URLSAFE, 22)}.{draw(r, ALNUM, 24)}.{draw(r, ALNUM, 20)}")],
    "grafana_token": [
        _token(lambda r: "glc_" + draw(r, BASE64, 80)),
        _token(lambda r: "glsa_" + draw(r, ALNUM, 32) + "_" + draw(r, HEX, 8)),
    ],
    "tailscale_key": [_token(lambda r: "tskey-auth-" + draw(r, ALNUM, 12) + "-" + draw(r, ALNUM, 30))],
    "dynatrace_token": [_token(lambda r: f"dt0c01.{draw(r, UPPER_DIGITS, 24)}.{draw(r, UPPER_DIGITS, 64)}")],
    "new_relic_key": [_token(lambda r: "NRAK-" + draw(r, UPPER_DIGITS, 27))],
    "sentry_token": [
        _token(lambda r: "sntryu_" + draw(r, HEX, 64)),
        _token(lambda r: "sntrys_eyJ" + draw(r, BASE64, 120)),
    ],
    "scalingo_token": [_token(lambda r: "tk-us-" + draw(r, URLSAFE, 48))],
    "infracost_key": [_token(lambda r: "ico-" + draw(r, ALNUM, 32))],
    "prefect_key": [_token(lambda r: "pnu_" + draw(r, ALNUM, 36))],
    "readme_key": [_token(lambda r: "rdme_" + draw(r, LOWER_DIGITS, 70))],
    "supabase_key": [_token(lambda r: "sbp_" + draw(r, HEX, 40))],
    "planetscale_token": [_token(lambda r: "pscale_tkn_" + draw(r, URLSAFE, 43))],
    "sk_prefixed_key": [
        _token(lambda r: "sk-" + draw(r, ALNUM, 48)),
        _token(lambda r: r.choice(["sk-proj-", "sk-svcacct-", "sk-admin-"]) + draw(r, URLSAFE, 100)),
        _token(lambda r: "sk-ant-api03-" + draw(r, URLSAFE, 93)),
    ],
    "huggingface_token": [
        _token(
            lambda r: (
                r.choice(["hf_", "api_org_"]) + draw(r, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 34)
            )
        )
    ],
    "groq_key": [_token(lambda r: "gsk_" + draw(r, ALNUM, 52))],
    "xai_key": [_token(lambda r: "xai-" + draw(r, ALNUM, 80))],
    "replicate_token": [_token(lambda r: "r8_" + draw(r, ALNUM, 37))],
    "perplexity_key": [_token(lambda r: "pplx-" + draw(r, ALNUM, 48))],
    "stripe_key": [_token(lambda r: r.choice(["sk_live_", "sk_test_", "rk_live_", "rk_test_"]) + draw(r, ALNUM, 99))],
    "stripe_webhook_secret": [_token(lambda r: "whsec_" + draw(r, ALNUM, 32))],
    "shopify_token": [_token(lambda r: r.choice(["shpat_", "shpca_", "shppa_", "shpss_"]) + draw(r, HEX, 32))],
    "square_token": [
        _token(lambda r: "sq0atp-" + draw(r, URLSAFE, 22)),
        _token(lambda r: "sq0csp-" + draw(r, URLSAFE, 43)),
        _token(lambda r: "EAAA" + draw(r, URLSAFE, 60)),
    ],
    "flutterwave_key": [_token(lambda r: "FLWSECK_TEST-" + draw(r, "abcdefgh0123456789", 32) + "-X")],
    "shippo_token": [_token(lambda r: "shippo_live_" + draw(r, HEX, 40))],
    "easypost_key": [_token(lambda r: "EZAK" + draw(r, ALNUM, 54))],
    "plaid_token": [_token(lambda r: "access-sandbox-" + _uuid(r))],
    "slack_token": [
        _token(lambda r: f"xox{r.choice('bpa')}-{_digits(r, 12)}-{_digits(r, 13)}-{draw(r, ALNUM, 24)}"),
        _token(lambda r: f"xoxe-1-{draw(r, ALNUM, 140)}"),
        _token(lambda r: f"xoxe.xoxp-1-{draw(r, ALNUM, 150)}"),
        _token(lambda r: f"xapp-1-A{draw(r, UPPER_DIGITS, 10)}-{_digits(r, 13)}-{draw(r, HEX, 64)}"),
    ],
    "slack_webhook": [_slack_webhook],
    "discord_webhook": [_discord_webhook],
    "teams_webhook": [_teams_webhook],
    "discord_bot_token": [
        _token(lambda r: r.choice("MNO") + draw(r, ALNUM, 25) + "." + draw(r, URLSAFE, 6) + "." + draw(r, URLSAFE, 38))
    ],
    "telegram_bot_token": [_token(lambda r: f"{_digits(r, 10)}:AA{draw(r, URLSAFE, 33)}")],
    "twilio_api_key": [_token(lambda r: "SK" + draw(r, HEX, 32))],
    "sendgrid_key": [_token(lambda r: f"SG.{draw(r, URLSAFE, 22)}.{draw(r, URLSAFE, 43)}")],
    "mailgun_key": [_token(lambda r: r.choice(["key-", "pubkey-"]) + draw(r, HEX, 32))],
    "mailchimp_key": [_token(lambda r: draw(r, HEX, 32) + f"-us{r.randint(1, 21)}")],
    "atlassian_token": [_token(lambda r: "ATATT3xFfGF0" + draw(r, URLSAFE, 180))],
    "linear_key": [_token(lambda r: "lin_api_" + draw(r, ALNUM, 40))],
    "notion_token": [
        _token(lambda r: "ntn_" + _digits(r, 11) + draw(r, ALNUM, 35)),
        _token(lambda r: "secret_" + draw(r, ALNUM, 43)),
    ],
    "postman_key": [_token(lambda r: f"PMAK-{draw(r, HEX, 24)}-{draw(r, HEX, 34)}")],
    "typeform_token": [_token(lambda r: "tfp_" + draw(r, URLSAFE, 59))],
    "contentful_token": [_token(lambda r: "CFPAT-" + draw(r, URLSAFE, 43))],
    "frameio_token": [_token(lambda r: "fio-u-" + draw(r, URLSAFE, 64))],
    "adobe_secret": [_token(lambda r: "p8e-" + draw(r, ALNUM, 32))],
    "mapbox_secret_token": [_token(lambda r: f"sk.eyJ{draw(r, URLSAFE, 60)}.{draw(r, URLSAFE, 22)}")],
    "dropbox_token": [_token(lambda r: "sl." + draw(r, URLSAFE, 130))],
    "jwt": [_token(_jwt), _token(_unsigned_jwt)],
}

# Neutral surroundings: nothing in them names a secret. Discord bot tokens are claimed beside the word.
CONTEXTS = (
    "use {} for the deploy",
    "export CONFIG_VALUE={}",
    '{{"value": "{}", "n": 1}}',
    "`{}`",
    "value: '{}'\n",
    "the value was {}.",
)
_DISCORD_CONTEXTS = tuple(f"our Discord bot runs with {c}" for c in CONTEXTS)
PER_GENERATOR = 3


def vendor_rows(seed: int = 15) -> list[Labelled]:
    """The labelled table: every generator, in every context, a few draws each."""
    rng = random.Random(seed)
    rows = []
    for name, generators in SAMPLES.items():
        contexts = _DISCORD_CONTEXTS if name == "discord_bot_token" else CONTEXTS
        for generator in generators:
            for context in contexts:
                for _ in range(PER_GENERATOR):
                    written, secret = generator(rng)
                    rows.append(Labelled(f"vendor:{name}", context.format(written), (secret,)))
    return rows


VENDOR_ROWS = vendor_rows()


def _format(name: str) -> VendorFormat:
    return next(f for f in VENDOR_FORMATS if f.name == name)


def test_no_format_matches_less_than_a_run() -> None:
    # The runs the needles are looked for in are `_MIN_TOKEN` characters at least; a shorter token would be
    # skipped unseen.
    for fmt in VENDOR_FORMATS:
        if not fmt.scan:
            assert re._parser.parse(fmt.pattern.pattern).getwidth()[0] >= _MIN_TOKEN, fmt.name  # type: ignore[attr-defined]


def test_the_table_is_well_formed_and_covers_every_format() -> None:
    well_formed(VENDOR_ROWS)
    # The families' tables (`vendors_cloud`, `vendors_saas`) have test modules of their own.
    names, families = {f.name for f in VENDOR_FORMATS}, {f.name for f in (*CLOUD_FORMATS, *SAAS_FORMATS)}
    assert names - families <= set(SAMPLES) <= names
    assert len({f.name for f in VENDOR_FORMATS}) == len(VENDOR_FORMATS)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_sample_matches_its_format(name: str) -> None:
    rng = random.Random(name)
    fmt = _format(name)
    for generator in SAMPLES[name]:
        written, secret = generator(rng)
        text = f"our Discord bot: {written} " if name == "discord_bot_token" else f" {written} "
        spans = find_vendor_tokens(FoldedText(text))
        assert any(text[s:e] == secret for s, e in spans), (written, spans)
        assert fmt.pattern.search(text) is not None


def test_every_row_is_redacted() -> None:
    assert misses(VENDOR_ROWS) == []


def test_every_row_is_detected() -> None:
    assert all(has_likely_secret(row.text) for row in VENDOR_ROWS)


def test_a_token_is_one_redaction_and_the_context_stays() -> None:
    token = "ghp_" + draw(random.Random(3), ALNUM, 36)
    result = sanitize_text(f"export CONFIG_VALUE={token} # ci")
    assert (result.value, result.report.text_redactions) == ("export CONFIG_VALUE=[REDACTED] # ci", 1)


def test_webhooks_keep_their_host() -> None:
    written, _secret = _slack_webhook(random.Random(4))
    assert sanitize_text(f"post to {written} now").value == "post to https://hooks.slack.com/services/[REDACTED] now"


def test_a_google_key_ending_in_a_dash_loses_the_dash_too() -> None:
    key = "AIza" + draw(random.Random(5), URLSAFE, 34) + "-"
    assert sanitize_text(f"key {key} ok").value == "key [REDACTED] ok"
    assert sanitize_text(f"key {key} ok", Policy.spec_compatible()).value == f"key {key} ok"  # the spec's miss


def test_an_unsigned_jwt_is_redacted() -> None:
    token = _unsigned_jwt(random.Random(6))
    assert token.endswith(".")
    assert sanitize_text(f"jwt {token} done").value == "jwt [REDACTED] done"


def test_the_aws_secret_key_is_found_beside_its_key_id() -> None:
    rng = random.Random(7)
    key_id, secret = "AKIA" + draw(rng, UPPER_DIGITS, 16), draw(rng, BASE64, 40)
    csv = f"User name,Password,Access key ID,Secret access key\nci,,{key_id},{secret}\n"
    assert sanitize_text(csv).value == "User name,Password,Access key ID,Secret access key\nci,,[REDACTED],[REDACTED]\n"
    # Without a key id nearby, 40 characters of base64 are not taken for a secret.
    assert sanitize_text(f"digest {secret} ok").value == f"digest {secret} ok"


def test_a_hex_digest_beside_a_key_id_is_not_a_secret() -> None:
    key_id, digest = "AKIA" + draw(random.Random(8), UPPER_DIGITS, 16), draw(random.Random(9), HEX, 40)
    assert sanitize_text(f"{key_id} commit {digest}").value == f"[REDACTED] commit {digest}"


def test_a_token_inside_a_longer_run_is_left_alone() -> None:
    token = "ghp_" + draw(random.Random(10), ALNUM, 36)
    for text in (f"x{token}", f"sha-{token}", f"9{token}"):
        assert find_vendor_tokens(FoldedText(text)) == []


def test_the_gcp_service_account_file_loses_its_key_and_key_id() -> None:
    rng = random.Random(11)
    key_id, body = draw(rng, HEX, 40), draw(rng, BASE64, 64)
    document = json.dumps(
        {
            "type": "service_account",
            "project_id": "demo",
            "private_key_id": key_id,
            "private_key": f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n",
            "client_email": "ci@demo.iam.gserviceaccount.com",
        }
    )
    scrubbed = sanitize_text(document).value
    assert key_id not in scrubbed and body not in scrubbed
    assert '"private_key_id": "[REDACTED]"' in scrubbed and "[REDACTED_PRIVATE_KEY]" in scrubbed
    assert "ci@demo.iam.gserviceaccount.com" in scrubbed


@pytest.mark.parametrize("fmt", [f for f in VENDOR_FORMATS if not f.scan], ids=lambda f: f.name)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_every_match_of_a_format_is_found_through_its_needles(fmt: VendorFormat, data: st.DataObject) -> None:
    token = data.draw(st.from_regex(fmt.pattern, fullmatch=True))
    text = f" {token} "
    assume(fmt.pattern.search(text) is not None and "\n" not in token)
    expected = fmt.pattern.search(text)
    assert expected is not None
    assert expected.span(fmt.group) in find_vendor_tokens(FoldedText(text))
