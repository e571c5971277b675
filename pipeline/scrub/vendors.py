"""Vendor token formats: the credentials public secret scanners know by a distinctive prefix or shape.

Each format below was written from the vendor's public description of its tokens (a prefix, an alphabet,
a length), the same facts the default rules of gitleaks and trufflehog encode. Every pattern starts with
its literal prefix, or holds another literal at a known distance from its start; those literals are the
needles. Every token is a run of at least 19 token characters, and such runs are rare in prose, so a
bytes translation finds the runs, a scan finds the needles in them (see `_needles.NeedleIndex`), and each
format is tried only where its needle stands, with `match` rather than a scan of the whole text: a text
costs one translation and short scans however many formats there are. Shapes without a literal (a Discord bot
token, a service-account key id, and the families' keyed formats of `vendors_cloud` and `vendors_saas`) are
searched for when their word occurs, near it where the format says so (`VendorFormat.near`).
A token is bounded by characters outside its alphabet on both sides, so `AIza...-` keeps its final `-`
(which `\\b` gave back) and a token inside a longer run is left alone.

Formats with no distinctive shape (a 40-character AWS secret, a 32-character hex key) are found through
their name instead (`assignments`), or, for the AWS secret access key, through the key id beside it.
"""

from __future__ import annotations

import re

from pipeline.scrub.needles import FoldedText, NeedleIndex
from pipeline.scrub.vendor_format import L, R, VendorFormat, fmt
from pipeline.scrub.vendors_cloud import CLOUD_FORMATS
from pipeline.scrub.vendors_saas import SAAS_FORMATS

Span = tuple[int, int]


VENDOR_FORMATS: tuple[VendorFormat, ...] = (
    # Cloud providers.
    fmt("aws_access_key_id", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])",
         "AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    fmt("google_api_key", L + r"AIza[A-Za-z0-9_-]{35}" + R, "AIza"),
    fmt("google_oauth_secret", L + r"GOCSPX-[A-Za-z0-9_-]{28}" + R, "GOCSPX-"),
    fmt("google_oauth_access_token", L + r"ya29\.[A-Za-z0-9_-]{20,}" + R, "ya29."),
    fmt("google_oauth_refresh_token", r"(?<![A-Za-z0-9_/-])1//0[A-Za-z0-9_-]{40,}" + R, "1//0"),
    fmt("gcp_private_key_id", r""""private_key_id"\s*:\s*"([0-9a-f]{40})\"""", '"private_key_id"', group=1,
         scan=True),
    fmt("azure_ad_client_secret", r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"
         r"(?![A-Za-z0-9_~-])", "Q~", lead=(4, 4)),
    fmt("alibaba_access_key_id", r"(?<![A-Za-z0-9])LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])", "LTAI"),
    fmt("tencent_secret_id", r"(?<![A-Za-z0-9])AKID[A-Za-z0-9]{32}(?![A-Za-z0-9])", "AKID"),
    fmt("digitalocean_token", L + r"do[opr]_v1_[a-f0-9]{64}" + R, "_v1_", lead=(3, 3)),
    fmt("databricks_token", L + r"dapi[a-f0-9]{32}(?:-[0-9])?" + R, "dapi"),
    fmt("flyio_token", L + r"(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3})" + R,
         "fo1_", "fm1", "fm2"),
    # Source hosting, CI and package registries.
    fmt("github_token", L + r"gh[pousr]_[A-Za-z0-9_]{20,}" + R, "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    fmt("github_fine_grained", L + r"github_pat_[A-Za-z0-9_]{20,}" + R, "github_pat_"),
    fmt("gitlab_token", L + r"(?:glpat-[A-Za-z0-9_.-]{16,}|gl(?:dt|ft|soat|rt|cbt|imt|ptt|agent|oas|ffct|wt)-"
         r"[A-Za-z0-9_.-]{20,})" + R,
         "glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-",
         "glffct-", "glwt-"),
    fmt("gitlab_runner_registration", L + r"GR1348941[A-Za-z0-9_-]{20,}" + R, "GR1348941"),
    fmt("npm_token", L + r"npm_[A-Za-z0-9]{20,}" + R, "npm_"),
    fmt("pypi_token", L + r"pypi-AgE[A-Za-z0-9_-]{50,}" + R, "pypi-AgE"),
    fmt("docker_hub_token", L + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}" + R, "dckr_"),
    fmt("rubygems_token", L + r"rubygems_[a-f0-9]{48}" + R, "rubygems_"),
    fmt("clojars_token", L + r"CLOJARS_[a-z0-9]{60}" + R, "CLOJARS_"),
    fmt("artifactory_token", r"(?<![A-Za-z0-9])(?:AKCp[A-Za-z0-9]{69}|cmVmdGtuOjAxOj[A-Za-z0-9]{50,})"
         r"(?![A-Za-z0-9])", "AKCp", "cmVmdGtuOjAxOj"),
    fmt("sourcegraph_token", L + r"sgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}" + R, "sgp_"),
    fmt("octopus_deploy_key", r"(?<![A-Za-z0-9-])API-(?=[A-Z0-9]*?[0-9])(?=[A-Z0-9]*?[A-Z])[A-Z0-9]{26,32}"
         r"(?![A-Za-z0-9])", "API-"),
    fmt("pulumi_token", L + r"pul-[a-f0-9]{40}" + R, "pul-"),
    fmt("terraform_cloud_token", L + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}" + R,
         ".atlasv1.", lead=(14, 14)),
    fmt("hashicorp_vault_token", L + r"hv[sbr]\.[A-Za-z0-9_-]{24,}(?:\.[A-Za-z0-9]{5})?" + R, "hvs.", "hvb.", "hvr."),
    fmt("doppler_token", L + r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}" + R, "dp."),
    fmt("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}(?![A-Za-z0-9])", "AGE-SECRET-KEY-1"),
    fmt("onepassword_service_token", L + r"ops_eyJ[A-Za-z0-9+/=_-]{100,}" + R, "ops_eyJ"),
    fmt("openshift_token", L + r"sha256~[A-Za-z0-9_-]{43}" + R, "sha256~"),
    fmt("harness_token", L + r"pat\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}" + R, "pat."),
    fmt("grafana_token", L + r"(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})" + R,
         "glc_", "glsa_"),
    fmt("tailscale_key", L + r"tskey-(?:api|auth|client|webhook|scim)-[A-Za-z0-9]{8,}-[A-Za-z0-9]{20,}" + R,
         "tskey-"),
    fmt("dynatrace_token", L + r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}" + R, "dt0c01."),
    fmt("new_relic_key", L + r"(?:NRAK-[A-Z0-9]{27}|NRJS-[a-f0-9]{19}|NRII-[A-Za-z0-9_-]{32})" + R,
         "NRAK-", "NRJS-", "NRII-"),
    fmt("sentry_token", L + r"sntry[us]_[A-Za-z0-9+/=_-]{40,}" + R, "sntrys_", "sntryu_"),
    fmt("scalingo_token", L + r"tk-us-[A-Za-z0-9_-]{48}" + R, "tk-us-"),
    fmt("infracost_key", L + r"ico-[A-Za-z0-9]{32}" + R, "ico-"),
    fmt("prefect_key", L + r"pnu_[A-Za-z0-9]{36}" + R, "pnu_"),
    fmt("readme_key", L + r"rdme_[a-z0-9]{70}" + R, "rdme_"),
    fmt("supabase_key", L + r"(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,})" + R, "sbp_", "sb_secret_"),
    fmt("planetscale_token", L + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}" + R, "pscale_"),
    # AI providers.
    fmt("sk_prefixed_key", L + r"sk-(?:[A-Za-z0-9][A-Za-z0-9_-]{19,}|(?:proj|org|svcacct|admin)-[A-Za-z0-9_-]{12,})"
         + R, "sk-"),
    fmt("huggingface_token", L + r"(?:hf_|api_org_)[A-Za-z]{30,}" + R, "hf_", "api_org_"),
    fmt("groq_key", L + r"gsk_[A-Za-z0-9]{48,}" + R, "gsk_"),
    fmt("xai_key", L + r"xai-[A-Za-z0-9]{70,}" + R, "xai-"),
    fmt("replicate_token", L + r"r8_[A-Za-z0-9]{37}" + R, "r8_"),
    fmt("perplexity_key", L + r"pplx-[A-Za-z0-9]{40,}" + R, "pplx-"),
    # Payments and commerce.
    fmt("stripe_key", L + r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}" + R, "sk_", "rk_"),
    fmt("stripe_webhook_secret", L + r"whsec_[A-Za-z0-9]{24,}" + R, "whsec_"),
    fmt("shopify_token", L + r"(?:shp(?:at|ca|pa|ss|ua)_[a-fA-F0-9]{32}|shptka_[a-fA-F0-9]{32}|shprt_[A-Za-z0-9]{32,})"
         + R, "shpat_", "shpca_", "shppa_", "shpss_", "shpua_", "shptka_", "shprt_"),
    fmt("square_token", L + r"(?:sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}|EAAA[A-Za-z0-9_-]{60})" + R,
         "sq0atp-", "sq0csp-", "EAAA"),
    fmt("flutterwave_key", L + r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X" + R, "FLWSECK"),
    fmt("shippo_token", L + r"shippo_(?:live|test)_[a-f0-9]{40}" + R, "shippo_"),
    fmt("easypost_key", L + r"EZ[AT]K[A-Za-z0-9]{54}" + R, "EZAK", "EZTK"),
    fmt("plaid_token", L + r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}"
         r"-[0-9a-f]{4}-[0-9a-f]{12}" + R, "access-sandbox-", "access-development-", "access-production-"),
    # Messaging, email and collaboration.
    fmt("slack_token", L + r"(?:xox[abposre]-[A-Za-z0-9-]{14,}|xoxe\.xox[bp]-[0-9]-[A-Za-z0-9-]{10,}"
         r"|xapp-[0-9]-[A-Za-z0-9-]{12,})" + R, "xox", "xapp-"),
    fmt("slack_webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/_-]{20,})",
         "hooks.slack.com/", group=1),
    fmt("discord_webhook", r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/([A-Za-z0-9_-]{60,68})",
         "/api/webhooks/", group=1, lead=(11, 14)),
    fmt("teams_webhook", r"\.webhook\.office\.com/webhookb2/([A-Za-z0-9_@/.-]{40,})", ".webhook.office.com/",
         group=1),
    fmt("discord_bot_token", r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"
         r"(?![A-Za-z0-9_-])", "discord", scan=True),
    fmt("telegram_bot_token", r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}" + R, ":AA", lead=(8, 10)),
    fmt("twilio_api_key", r"(?<![A-Za-z0-9])SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", "SK"),
    fmt("sendgrid_key", L + r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}" + R, "SG."),
    fmt("mailgun_key", L + r"(?:pub)?key-[0-9a-f]{32}" + R, "key-", lead=(0, 3)),
    fmt("mailchimp_key", L + r"[0-9a-f]{32}-us[0-9]{1,2}" + R, "-us", lead=(32, 32)),
    fmt("atlassian_token", L + r"AT[ACS]TT3[A-Za-z0-9_=-]{50,}" + R, "ATATT3", "ATCTT3", "ATSTT3"),
    fmt("linear_key", L + r"lin_api_[A-Za-z0-9]{40}" + R, "lin_api_"),
    fmt("notion_token", L + r"(?:ntn_[0-9]{11}[A-Za-z0-9]{32,35}|secret_[A-Za-z0-9]{43})" + R, "ntn_", "secret_"),
    fmt("postman_key", L + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + R, "PMAK-"),
    fmt("typeform_token", L + r"tfp_[A-Za-z0-9_.=-]{59}" + R, "tfp_"),
    fmt("contentful_token", L + r"CFPAT-[A-Za-z0-9_-]{43}" + R, "CFPAT-"),
    fmt("frameio_token", L + r"fio-u-[A-Za-z0-9_=-]{64}" + R, "fio-u-"),
    fmt("adobe_secret", L + r"p8e-[A-Za-z0-9]{32}" + R, "p8e-"),
    fmt("mapbox_secret_token", L + r"sk\.eyJ[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,}" + R, "sk.eyJ"),
    fmt("dropbox_token", L + r"sl\.[A-Za-z0-9_-]{100,}" + R, "sl."),
    # Signed tokens: a JSON header, a payload, and a signature that may be empty (`alg: none`).
    fmt("jwt", r"(?<![A-Za-z0-9_.-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_.-]*(?![A-Za-z0-9_-])",
         "eyJ"),
    *CLOUD_FORMATS,
    *SAAS_FORMATS,
)  # fmt: skip

_MATCHED = tuple(f for f in VENDOR_FORMATS if not f.scan)
_SCAN_NEEDLES = tuple((needle, f) for f in VENDOR_FORMATS if f.scan for needle in f.needles)
# Where a needle is looked for: first the few characters that, between them, anchor every needle while
# being rare in the long runs of documentation (URLs, paths and options, counted over tldr-pages), then the
# other token characters from rarest to commonest, the letters of `https://` and `.com` last.
_RUN_RARITY = 'J~K9GNA021xvk_-d.QYZ+W@X"VHBFUL=R7OIDP6TM5SE34C8qzjywbf:uglmhcnirpasoe/t'
_NEEDLES = NeedleIndex((n for f in _MATCHED for n in f.needles), _RUN_RARITY)
_BY_NEEDLE: dict[str, tuple[VendorFormat, ...]] = {
    needle: tuple(f for f in _MATCHED if needle in f.needles) for needle in _NEEDLES.needles
}
# The characters of every format's tokens and of the text around their needles; no token is shorter.
# (The leftmost match of a greedy run starts where the run does, so no lookbehind is needed.)
_TOKEN_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+/=~:@"-'
_MIN_TOKEN = 19
_RUN = re.compile(f"[{re.escape(_TOKEN_CHARS)}]{{{_MIN_TOKEN},}}")
_TOKEN_MASK = bytes(0x61 if chr(b) in _TOKEN_CHARS else 0x20 for b in range(256))
_LONG_RUN = b"a" * _MIN_TOKEN

# The AWS secret access key: 40 characters of base64 within a few lines of a key id.
_AWS_KEY_ID = VENDOR_FORMATS[0].pattern
_AWS_KEY_ID_NEEDLES = frozenset(VENDOR_FORMATS[0].needles)
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_WINDOW = 300
_MIXED = (re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"[0-9]"))


def _aws_secrets(text: str) -> list[Span]:
    spans: list[Span] = []
    for key_id in _AWS_KEY_ID.finditer(text):
        lo, hi = max(0, key_id.start() - _AWS_WINDOW), key_id.end() + _AWS_WINDOW
        # Base64 of 30 random bytes holds both cases and a digit; a hex digest or a word run does not.
        spans.extend(c.span() for c in _AWS_SECRET.finditer(text, lo, hi) if all(p.search(c.group()) for p in _MIXED))
    return spans


def _runs(text: str) -> list[Span]:
    """The spans of the runs of token characters long enough to hold a token."""
    if not text.isascii():
        return [m.span() for m in _RUN.finditer(text)]
    # bytes.translate and bytes.find run at memory speed; ASCII offsets are the text's.
    mask = text.encode("ascii").translate(_TOKEN_MASK)
    spans: list[Span] = []
    start = mask.find(_LONG_RUN)
    while start >= 0:
        end = mask.find(b" ", start + _MIN_TOKEN)
        if end < 0:
            spans.append((start, len(mask)))
            break
        spans.append((start, end))
        start = mask.find(_LONG_RUN, end)
    return spans


def _runs_hold_needle(text: str, runs: list[Span]) -> bool:
    """Whether one of `runs` holds a needle of a format found in runs; without one, no run is a token.

    Most runs hold none (links, paths, options): one scan of them all, joined, rules them out together. A space
    holds no needle and ends every run, so no needle spans two runs of the join.
    """
    return bool(runs) and _NEEDLES.pattern.search(" ".join([text[start:end] for start, end in runs])) is not None


def may_hold_run_token(text: str) -> bool:
    """Whether `find_vendor_tokens` could find a token in the text's runs: one long enough, holding a needle."""
    return _runs_hold_needle(text, _runs(text))


def find_vendor_tokens(probe: FoldedText) -> list[Span]:
    """The spans of every vendor token in the text (overlaps not resolved)."""
    text = probe.text
    spans: set[Span] = set()
    key_id = False
    runs = _runs(text)
    if _runs_hold_needle(text, runs):
        for start, end in runs:
            for at, needle in _NEEDLES.occurrences(text[start:end]):
                key_id = key_id or needle in _AWS_KEY_ID_NEEDLES
                for form in _BY_NEEDLE[needle]:
                    spans.update(form.spans_at(text, start + at))
    folded = probe.folded
    for needle, form in _SCAN_NEEDLES:
        # The first character alone, found by memchr, rules most texts out: a quote is rare in prose.
        if needle[0] in folded and needle in folded:
            spans.update(form.spans_near(text, folded, needle))
    if key_id:
        spans.update(_aws_secrets(text))
    return list(spans)
