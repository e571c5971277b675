"""Developer and SaaS platform tokens: Vault, Atlassian (cloud and Data Center), Bitbucket, Tableau, Octopus, Shopify,
Salesforce, Airtable, Smartsheet, Duo, Alchemy, ScrapingBee, Brandfetch, AccuWeather.

Each format is written from the vendor's own documentation of its tokens, and where that names no shape, from the
shape its tokens are issued in (said so beside the format); the module is a table for `vendors`, which keeps the
family's older rows (Vault `hvs.`, Atlassian cloud and Bitbucket access tokens, Octopus, Shopify)
among the formats of their kind. A token with a literal (`ATBB`, `oaa...v1.`, an Alchemy URL) is found through it.
A token without one (a Data Center PAT, a Duo key, a Smartsheet token...) is a `scan` format whose needles are its
vendor's names (or API host, or the token's own prefix), so it counts only within `near` of one; its value must
also look generated, holding the character classes a random draw of its alphabet almost always holds
(`_random`), so a word, a hex digest or a camel-case identifier of the same length is not taken for one. Those
formats are searched together, as one entry of the table (`VendorNames`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.scrub.vendor_format import L, R, Span, VendorFormat, fmt

NamesIndex = tuple[tuple[str, tuple[VendorFormat, ...]], ...]


@dataclass(frozen=True)
class VendorNames(VendorFormat):
    """Formats placed by their vendor's name, searched as one `scan` entry of the table: each member is a `scan`
    format whose needles are names (lower case) and whose values count within its `near` of one (`by_name`).

    The entry's own needles are credential words that the texts the scrubber searches hold already (`key`,
    `token`): a vendor's name as a needle of the table would cost every text one more search before the shortcut
    (`precheck`), and a text that names no credential has no value to find. So the words open the search, once
    per text, and the names place it.
    """

    by_name: NamesIndex = ()

    def spans_near(self, text: str, folded: str, needle: str) -> set[Span]:
        # Once per text, whichever of the words brought it here.
        if needle != next(word for word in self.needles if word in folded):
            return set()
        spans: set[Span] = set()
        for name, members in self.by_name:
            if name in folded:
                for member in members:
                    spans |= member.spans_near(text, folded, name)
        return spans


def vendor_names(name: str, words: tuple[str, ...], members: tuple[VendorFormat, ...]) -> VendorNames:
    """The entry for `members`, opened by `words`; each name is looked for once per text."""
    names = dict.fromkeys(needle for member in members for needle in member.needles)
    index = tuple((n, tuple(m for m in members if n in m.needles)) for n in names)
    return VendorNames(name, _NEVER, words, scan=True, by_name=index)


_NEVER = re.compile(r"(?!)")  # the entry's own pattern: only its members' patterns match
_ALNUM = "A-Za-z0-9"
_B64 = "A-Za-z0-9+/"
_URLSAFE = "A-Za-z0-9_-"
_CLASSES = {"d": "0-9", "u": "A-Z", "l": "a-z"}


def _random(alphabet: str, size: int | str, classes: str = "dul") -> str:
    """`size` characters (a count, or a `{m,n}` quantifier) of `alphabet`, holding one of each of `classes`
    (`d` digit, `u` upper, `l` lower case): a lookahead per class, held to the token's own characters."""
    quantifier = f"{{{size}}}" if isinstance(size, int) else size
    return "".join(f"(?=[{alphabet}]*?[{_CLASSES[c]}])" for c in classes) + f"[{alphabet}]{quantifier}"


def _bounded(alphabet: str, body: str, after: str = "") -> str:
    """`body`, with no character of `alphabet` on either side (nor of `after` after it, a padding or the rest of
    a longer token): not part of a longer run. An `=` before it is an assignment's; a `/` a path's, whose
    segments these keys are not (an Alchemy URL has a format of its own)."""
    return f"(?<![/{alphabet}]){body}(?![{alphabet}{after}])"


# How far from its vendor's name a value may stand: a name, a separator and a quote, or an API host and a path.
_NEAR = 160

NAMED_FORMATS: tuple[VendorFormat, ...] = (
    # HashiCorp Vault before 1.10 (developer.hashicorp.com/vault/docs/concepts/tokens, upgrading/upgrade-to-1.0.0
    # and upgrade-to-1.10.x): `s.` service, `b.` batch, `r.` recovery tokens; a 24-character base62 body (26
    # characters in all), base64url and longer for batch tokens; `.` and a 5-character namespace id after a token
    # made in a namespace. A prefix too short and common to look for everywhere, so beside the word "vault"
    # (`VAULT_TOKEN`, `vault login`, `X-Vault-Token`). The `hvs.`, `hvb.`, `hvr.` tokens are in `vendors`.
    fmt("hashicorp_vault_legacy_token",
        r"(?<![A-Za-z0-9_./+-])(?:[sr]\." + _random(_ALNUM, 24) + r"(?:\.[A-Za-z0-9]{5})?"
        r"|b\." + _random(_URLSAFE, "{24,}") + r")(?![A-Za-z0-9_-])",
        "vault", scan=True, near=200),
    # Atlassian cloud API tokens before `ATATT3` (support.atlassian.com, "Manage API tokens for your Atlassian
    # account"; all expired by May 2026 but still in old scripts): 24 alphanumerics. A digit and a letter past `f`,
    # so a 24-hex-digit account id (`5b10ac8d...`) is not one.
    fmt("atlassian_api_token_legacy",
        _bounded(_ALNUM, r"(?=[A-Za-z0-9]*?[0-9])(?=[A-Za-z0-9]*?[g-zG-Z])[A-Za-z0-9]{24}"),
        "jira", "confluence", "atlassian", scan=True, near=_NEAR),
    # Jira, Confluence and Bitbucket Data Center personal access tokens (confluence.atlassian.com/enterprise/
    # using-personal-access-tokens-1026032365.html): 44 characters of base64, beside a product's name.
    fmt("atlassian_data_center_pat", _bounded(_B64, _random(_B64, 44), "=_-"),
        "jira", "confluence", "bitbucket", "atlassian", scan=True, near=_NEAR),
    # Tableau personal access token secrets (help.tableau.com/current/server/en-us/security_personal_access_tokens
    # .htm; REST API sign-in): base64 of 16 bytes (22 characters and `==`), a colon, 32 alphanumerics.
    fmt("tableau_pat", _bounded(_B64, r"[A-Za-z0-9+/]{22}==:" + _random(_ALNUM, 32), "="),
        "tableau", "personalaccesstoken", scan=True, near=_NEAR),
    # Salesforce OAuth access tokens (developer.salesforce.com, "Understanding the OAuth Refresh Token Process"):
    # the 15-character org id (`00D` and 12 characters; any `00` is taken), `!`, the session part. `!` ends a run
    # of token characters, so the token's own prefix places it, or the vendor's name. After `Bearer ` the marker
    # stage has taken the org id already, up to the `!`: the session part after its `[REDACTED]` is the rest.
    fmt("salesforce_access_token",
        r"(?:(?<![A-Za-z0-9])00[A-Za-z0-9]{13}|(?<=\[REDACTED\]))![A-Za-z0-9._]{80,200}(?![A-Za-z0-9._])",
        "00d", "salesforce", "]!", scan=True, near=300),
    # Salesforce refresh tokens (the same page's example response): `5Aep` and about 80 characters, or 77 and `==`,
    # beside the vendor or the field's name.
    fmt("salesforce_refresh_token", r"(?<![A-Za-z0-9._])5Aep[A-Za-z0-9._]{70,100}(?:==?)?(?![A-Za-z0-9._=])",
        "salesforce", "refresh_token", "refreshtoken", scan=True, near=_NEAR),
    # Airtable personal access tokens (airtable.com/developers/web/api/authentication): the token id (`pat` and
    # 14 characters), a dot and 64 hex digits. `pat` starts every `path/to/...` of documentation, so beside the name.
    fmt("airtable_pat", _bounded(_URLSAFE, r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"), "airtable", scan=True, near=_NEAR),
    # Airtable API keys, retired in February 2024 for the tokens above: `key` and 14 characters (as issued).
    fmt("airtable_api_key_legacy", _bounded(_ALNUM, "key" + _random(_ALNUM, 14)), "airtable", scan=True, near=_NEAR),
    # Smartsheet (developers.smartsheet.com/api/smartsheet/guides/basics/authentication): 37 alphanumerics.
    fmt("smartsheet_token", _bounded(_ALNUM, _random(_ALNUM, 37)), "smartsheet", scan=True, near=_NEAR),
    # Duo (duo.com/docs/adminapi, "First Steps"): integration keys are `DI` and 18 upper-case alphanumerics,
    # secret keys 40 alphanumerics; the API host is `api-XXXXXXXX.duosecurity.com`.
    fmt("duo_integration_key", _bounded(_ALNUM, "DI" + _random("A-Z0-9", 18, "d")), "duo", scan=True, near=_NEAR),
    fmt("duo_secret_key", _bounded(_ALNUM, _random(_ALNUM, 40)), "duo", scan=True, near=_NEAR),
    # Alchemy (alchemy.com/docs/create-an-api-key): 32 characters of letters, digits, `_` and `-`.
    fmt("alchemy_api_key", _bounded(_URLSAFE, _random(_URLSAFE, 32)), "alchemy", scan=True, near=_NEAR),
    # ScrapingBee (scrapingbee.com/documentation): 80 upper-case letters and digits.
    fmt("scrapingbee_api_key", _bounded(_ALNUM, _random("A-Z0-9", 80, "du")), "scrapingbee", scan=True, near=200),
    # Brandfetch (docs.brandfetch.com/concepts/authentication): the API key, sent as a bearer token, is base64 of
    # 32 bytes (older keys, as issued: 40 alphanumerics); the client ID is public and left alone.
    fmt("brandfetch_api_key",
        _bounded(_B64 + "-", "(?:" + _random(_B64, 43) + "=|" + _random(_ALNUM, 40) + ")", "="),
        "brandfetch", scan=True, near=_NEAR),
    # AccuWeather (developer.accuweather.com/documentation/authentication), keys as issued: 32 alphanumerics (35
    # with a `%` in some older ones), or a developer portal key, `zpka_`, 32 hex digits, `_`, 8 hex digits.
    fmt("accuweather_api_key",
        _bounded("A-Za-z0-9_%-", "(?:" + _random(_ALNUM, 32) + r"|(?=[A-Za-z0-9]*%)[A-Za-z0-9%]{35}"
                 "|zpka_[a-f0-9]{32}_[a-f0-9]{8})"),
        "accuweather", scan=True, near=_NEAR),
)  # fmt: skip

SAAS_FORMATS: tuple[VendorFormat, ...] = (
    # Bitbucket app passwords (support.atlassian.com/bitbucket-cloud/docs/app-passwords; the prefix as Atlassian
    # confirms it): `ATBB` and 32 alphanumerics (24, then an 8-hex-digit CRC32 of them: 36 in all).
    fmt("bitbucket_app_password", L + r"ATBB[A-Za-z0-9]{32}" + R, "ATBB"),
    # Airtable OAuth access and refresh tokens (airtable.com/developers/web/api/oauth-reference; the shape as
    # issued): an id (`oaa` and 14 characters), `.v1.`, (`refresh.`), a base64url payload and a hex signature.
    fmt("airtable_oauth_token",
        L + r"oaa[A-Za-z0-9]{14}\.v1\.(?:refresh\.)?[A-Za-z0-9_-]{20,}(?:\.[a-f0-9]{16,})?" + R, "oaa"),
    # An Alchemy key is most often met at the end of an RPC URL: `https://eth-mainnet.g.alchemy.com/v2/<key>`
    # (letters and digits both, as in `_random`, written as two exclusions).
    fmt("alchemy_rpc_url_key",
        r"\.alchemy\.com/(?:v2|nft/v[23])/((?![A-Za-z_-]{32}|[0-9_-]{32})[A-Za-z0-9_-]{32})(?![A-Za-z0-9_-])",
        ".alchemy.com/", group=1),
    # `NAMED_FORMATS`, placed by a name, behind the words their values are written with.
    vendor_names("saas_named_tokens", ("key", "token", "secret", "auth"), NAMED_FORMATS),
)  # fmt: skip
