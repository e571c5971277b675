"""Secret and PII scrubbing of item text before it is stored (spec: safety.md).

Regular expressions, checksums, `phonenumbers` and `python-stdnum` only: no network, no model, and no
function here raises. The host runs `scrub_item` between document conversion and `store`, and computes
the item's fingerprint afterwards. It prefers redacting a harmless string to letting a secret into a
long-lived store, but leaves prose alone.

Two rule sets. `Policy.spec_compatible()` (`RuleSet.SPEC`) is safety.md exactly, so item ids stay
byte-identical with the Rust implementation; its docs/spec/safety.md §11 vectors are its tests. The default
(`RuleSet.EXTENDED`) differs from it as follows; the tokens (`[REDACTED]`, `[REDACTED_PRIVATE_KEY]`,
`[REDACTED_PII_<CLASS>]`), the stage order, the counters and the JSON walk are the same.

- Private keys: any `BEGIN ... PRIVATE KEY` label, a block without its END line redacted to the end of
  its base64 body, blocks inside JSON strings, PuTTY key files (`keys`).
- Markers: a placeholder or an ordinary word after `Bearer ` or `/secret/` is not a value ("Bearer
  tokens are...", "/secret/create"), and continuation fragments follow one space apart on the same
  line, with nothing between them dropped (safety.md skips punctuation and line breaks, and drops them).
- Credentials (stage 3) replace safety.md's 18 shapes with three finders (`credentials`):
  - the passwords in URLs and DSNs, the URL kept (`urls`);
  - about 80 vendor token formats with distinctive prefixes or shapes, the AWS secret key beside its
    key id, signed and unsigned JWTs, Google keys ending in `-` (`vendors`); cloud credentials beyond access
    keys, the secret part of a connection string only (`vendors_cloud`); developer and SaaS tokens, those
    without a prefix only near their vendor's name (`vendors_saas`);
  - the keyword rule (`assignments`): only the value is replaced, never the name or the separator
    (`password: [REDACTED]`, not `[REDACTED]`); every common assignment syntax (code, `.env`, YAML, JSON,
    TOML, XML, headers, query strings, flags, `name - 'value'`); a quoted value with spaces is redacted
    whole; the value must look like a secret (`values`): 8 characters at least (6 for a password with a
    non-letter), not an ordinary word (`words`), not a placeholder (`{{token}}`, `<token>`, `$TOKEN`,
    `${TOKEN}`), not code or a path, and in prose ("the secret from") a random-looking one; it never
    crosses a line break. So `token=abc`, "the secret is out" and "bearer shortword" are left alone, and
    safety.md's accepted false positives with them.
- PII (`identifiers`): IBANs only when stdnum validates them (mod 97 and the country's length), a failing
  one kept whole; spaced NINOs; dotted and spaced SSNs under the SSA's area rules, and nine digits after
  "SSN"; Korean RRNs with their check digit; hyphenated and dotted DNI/NIE; bare and colon-grouped Aadhaar;
  phones validated with `phonenumbers` in international and national formats, so `+44 20 7946 0958` is a
  phone and a bare 10-digit id, `555-123-4567` or `1000-2000` is not (and `(415) 555-2671` loses its
  parenthesis), and in the local formats of the regions the policy names or the text implies
  (`Policy.regions`, the `scrub.regions` setting); US ITIN, UK NHS, Canadian SIN, Australian TFN and the EU's
  personal ids checked with
  `python-stdnum`, the bare ones only beside their name (`national`); CUITs checked with stdnum (which
  accepts AFIP's check digit 9); a card's match ends on a digit, so the space after it stays.
- `Policy.corroborated()` also asks a keyword of bare Aadhaar and undashed RRN runs.
- Detection (`has_likely_secret`, `has_likely_pii`) takes a policy and follows its rule set.

Emails are detected and never redacted under either rule set unless the policy says
`redact_emails=True`; then they become `[REDACTED_PII_EMAIL]`, counted as PII.
"""

from pipeline.scrub.item import scrub_item
from pipeline.scrub.json_values import sanitize_json
from pipeline.scrub.report import BareCardGate, Policy, RuleSet, SanitizationReport, Sanitized
from pipeline.scrub.text_stages import (
    has_likely_email,
    has_likely_pii,
    has_likely_secret,
    redact_credential_markers,
    redact_pii,
    sanitize_text,
)

__all__ = [
    "BareCardGate",
    "Policy",
    "RuleSet",
    "SanitizationReport",
    "Sanitized",
    "has_likely_email",
    "has_likely_pii",
    "has_likely_secret",
    "redact_credential_markers",
    "redact_pii",
    "sanitize_json",
    "sanitize_text",
    "scrub_item",
]
