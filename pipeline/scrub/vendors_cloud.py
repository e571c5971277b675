"""Cloud credentials beyond the access keys of `vendors`: Azure storage keys, connection strings, SAS
tokens and Cosmos DB keys; AWS and GCP credentials other than key pairs and service-account JSON; Docker registry auth.

Each format is written from the vendor's own documentation of its tokens; the module is a table for `vendors`.
Where a credential sits in a larger structure (a connection string, a query string, a JSON block), only the
secret is the match (`group=1`): `AccountKey=[REDACTED];EndpointSuffix=...`, `&sig=[REDACTED]&se=...`,
`"auth": "[REDACTED]"`, so the account, the endpoint and the registry stay readable.

- Azure Storage and Cosmos DB account keys are 512-bit keys in base64: 86 characters and `==` ("Manage storage
  account access keys"; the Cosmos DB emulator's published key has the same shape). Bare, that is any 64 bytes of
  base64 (a SHA-512 digest too), so a bare key needs an account-key word nearby; after `AccountKey=` in a
  connection string ("Configure Azure Storage connection strings", and Cosmos DB's `AccountEndpoint=...;
  AccountKey=...;`) it needs nothing else.
- Service Bus, Event Hubs, Relay and IoT Hub shared access keys are 256-bit keys in base64, 43 characters and `=`,
  written `SharedAccessKey=` in their connection strings (`SharedAccessKeyName=` names the policy, not a secret).
- A shared access signature's `sig` is an HMAC-SHA256 in base64, 43 characters and `=`, URL-encoded in a query
  string (`%2B`, `%2F`, `%3D`) and in a SAS connection string's `SharedAccessSignature=sv=...&sig=...`, where it
  may come first; only the signature is secret, the permissions and expiry around it are not.
- AWS STS session tokens are base64 whose first bytes name the issuer: `IQoJb3JpZ2luX2Vj` ("!\\n\\torigin_ec"),
  `FwoGZXIvYXdz` ("\\x17\\n\\x06er/aws") and the `AQoDYXdz` ("\\x01\\n\\x03aws") of AWS's own examples; their size
  is not fixed but runs to hundreds of characters, so a short run after the prefix is a placeholder
  ("AQoDYXdzEJr...").
- Amazon MWS auth tokens are `amzn.mws.` and a UUID; Amazon Bedrock short-term API keys are `bedrock-api-key-` and
  the base64 of the presigned `bedrock.amazonaws.com` URL.
- Cloud Storage HMAC access IDs are `GOOG` and uppercase letters and digits, 61 characters for a service account
  and 24 for a user account ("HMAC keys"); their 40-character secret follows a secret's name (`assignments`).
- Docker's `config.json` keeps each registry's `auth` (base64 of `user:password`), `identitytoken` or
  `registrytoken` under `"auths"`, keyed by the registry's name.
"""

from __future__ import annotations

from pipeline.scrub.vendor_format import L, R, VendorFormat, fmt

# Runs of base64 in a connection string, a key listing or a query string end at anything outside base64.
_B64_BEFORE = r"(?<![A-Za-z0-9+/])"
_B64_AFTER = r"(?![A-Za-z0-9+/=])"
# A 512-bit key and a 256-bit key or HMAC-SHA256, in base64.
_KEY_512 = r"[A-Za-z0-9+/]{86}=="
_KEY_256 = r"[A-Za-z0-9+/]{43}="
# A base64 character of a query string, or its URL encoding; and the end of a run of them (a `%22` may follow).
_QUERY_B64 = r"(?:[A-Za-z0-9]|%2[BbFf]|[+/])"
_QUERY_B64_AFTER = r"(?![A-Za-z0-9+/=]|%2[BbFf]|%3[Dd])"
# The three issuer prefixes, each with enough base64 after it to fill a run of token characters before a `%`.
_STS_PREFIX = r"(?:IQoJb3JpZ2luX2Vj[A-Za-z0-9+/]{3}|FwoGZXIvYXdz[A-Za-z0-9+/]{7}|AQoDYXdz[A-Za-z0-9+/]{11})"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# Not letters alone: an identifier in capitals (`GOOGLEANALYTICS...`) is not an access ID.
_HMAC_ID_BODY = r"(?:(?![A-Z]{57}(?![A-Z0-9]))[A-Z0-9]{57}|(?![A-Z]{20}(?![A-Z0-9]))[A-Z0-9]{20})"
# A bare key: both cases and a digit, as 64 random bytes in base64 hold; not a digest's `sha512-...`.
_BARE_KEY_512 = (
    r"(?<![A-Za-z0-9+/_-])(?=[A-Za-z0-9+/]{0,85}[0-9])(?=[A-Za-z0-9+/]{0,85}[a-z])(?=[A-Za-z0-9+/]{0,85}[A-Z])"
    + _KEY_512
    + r"(?![A-Za-z0-9+/=_-])"
)
# Words that name an account key beside its value: `az storage account keys list` prints `"keyName"` before each
# `"value"`, Cosmos DB names its keys `primaryMasterKey`..., settings say `accountKey`, `ACCOUNT_KEY` or "account
# key". Each holds `key`, so the texts without one are still ruled out at once (`precheck`); each costs a search
# of the texts that hold `key`, so they are few.
_ACCOUNT_KEY_WORDS = ("accountkey", "account key", "account_key", "keyname", "masterkey")

CLOUD_FORMATS: tuple[VendorFormat, ...] = (
    # Azure.
    fmt("azure_account_key", _BARE_KEY_512, *_ACCOUNT_KEY_WORDS, scan=True, near=200),
    fmt("azure_connection_string_key", r"AccountKey=(" + _KEY_512 + ")" + _B64_AFTER, "AccountKey=", group=1),
    fmt("azure_shared_access_key", r"SharedAccessKey=(" + _KEY_256 + ")" + _B64_AFTER, "SharedAccessKey=", group=1),
    fmt("azure_sas_signature", r"(?<![A-Za-z0-9_.-])sig=(" + _QUERY_B64 + r"{43}(?:=|%3[Dd]))" + _QUERY_B64_AFTER,
         "sig=", group=1, scan=True, near=140),
    # AWS.
    fmt("aws_session_token", _B64_BEFORE + _STS_PREFIX + _QUERY_B64 + r"{80,}(?:=|%3[Dd]){0,2}" + _QUERY_B64_AFTER,
         "IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdz", "AQoDYXdz"),
    fmt("aws_mws_auth_token", r"(?<![A-Za-z0-9_.-])amzn\.mws\." + _UUID + R, "amzn.mws."),
    fmt("aws_bedrock_api_key", L + r"bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/]{100,}={0,2}"
         + _B64_AFTER, "bedrock-api-key-"),
    # Google Cloud.
    fmt("gcp_hmac_access_id", L + "GOOG" + _HMAC_ID_BODY + R, "GOOG"),
    # Docker registries.
    fmt("docker_config_auth", r'"(?:auth|identitytoken|registrytoken)"\s*:\s*"([A-Za-z0-9+/=._~-]{4,})"', '"auths"',
         group=1, scan=True, near=4096),
)  # fmt: skip
