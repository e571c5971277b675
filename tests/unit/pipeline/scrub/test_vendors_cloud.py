"""Cloud credential formats (`vendors_cloud`): a labelled table of generated credentials, and their near misses.

Each generator draws a credential from its vendor's documented shape (a 512-bit or 256-bit key in base64, an
HMAC-SHA256 signature, an STS token's issuer prefix, a UUID) with a seeded random source, and writes it where it
is met: a connection string, a SAS URL, a key listing, a `config.json`, or a neutral context that names nothing
secret. `NEAR_MISSES` holds, for every format, text of the same shape that must come out unchanged: a placeholder,
a wrong prefix or length, a digest, a sentence naming the format.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from collections.abc import Callable
from urllib.parse import quote

import pytest

from pipeline.scrub import Policy, has_likely_secret, sanitize_text
from pipeline.scrub.vendors_cloud import CLOUD_FORMATS
from tests.unit.pipeline.scrub.test_tables import (
    ALNUM,
    HEX,
    LOWER_DIGITS,
    UPPER_DIGITS,
    Labelled,
    draw,
    misses,
    well_formed,
)
from tests.unit.pipeline.scrub.test_vendors import CONTEXTS

Sample = tuple[str, tuple[str, ...]]  # (the text as it is written, the parts that must not survive)
Generator = Callable[[random.Random], Sample]

SPEC = Policy.spec_compatible()


def _bytes64(rng: random.Random, size: int, first: int | None = None) -> str:
    """`size` random bytes in base64; `first` fixes the first byte (0xFF makes the text start with `/`)."""
    data = bytes(rng.getrandbits(8) for _ in range(size))
    if first is not None:
        data = bytes([first]) + data[1:]
    return base64.b64encode(data).decode()


def _account_key(rng: random.Random) -> str:
    # A storage or Cosmos DB account key: 512 bits. One in eight starts with `/`, which reads as a path to the
    # keyword rule; the formats must not care.
    return _bytes64(rng, 64, 0xFF if rng.random() < 0.125 else None)


def _account(rng: random.Random) -> str:
    return draw(rng, LOWER_DIGITS, rng.randint(6, 14))


def _token(make: Callable[[random.Random], str]) -> Generator:
    return lambda rng: (token := make(rng), (token,))


# --- Azure -------------------------------------------------------------------------------------------------------


def _storage_keys_list(rng: random.Random) -> Sample:
    # `az storage account keys list`: the key is under "value", beside its "keyName".
    keys = [_account_key(rng), _account_key(rng)]
    listing = [
        {"creationTime": "2026-01-05T10:00:00+00:00", "keyName": f"key{i + 1}", "permissions": "FULL", "value": k}
        for i, k in enumerate(keys)
    ]
    return json.dumps(listing, indent=2), tuple(keys)


def _cosmos_keys_list(rng: random.Random) -> Sample:
    # `az cosmosdb keys list`: four keys, each named `...MasterKey`.
    names = ("primaryMasterKey", "primaryReadonlyMasterKey", "secondaryMasterKey", "secondaryReadonlyMasterKey")
    keys = {name: _account_key(rng) for name in names}
    return json.dumps(keys, indent=rng.choice([None, 2])), tuple(keys.values())


def _account_key_beside_its_name(rng: random.Random) -> Sample:
    key = _account_key(rng)
    template = rng.choice(
        [
            "Storage account key: {}",
            "AZURE_STORAGE_ACCOUNT_KEY={}",
            '{{"accountKey": "{}"}}',
            "{{ endpoint, auth: {{ masterKey: '{}' }} }}",
            "{} is the account key for local runs",
        ]
    )
    return template.format(key), (key,)


def _storage_connection_string(rng: random.Random) -> Sample:
    key = _account_key(rng)
    parts = [
        f"DefaultEndpointsProtocol={rng.choice(['https', 'http'])}",
        f"AccountName={_account(rng)}",
        f"AccountKey={key}",
        f"EndpointSuffix={rng.choice(['core.windows.net', 'core.chinacloudapi.cn', 'core.usgovcloudapi.net'])}",
    ]
    return ";".join(parts), (key,)


def _storage_connection_string_with_endpoints(rng: random.Random) -> Sample:
    # The documented form with explicit endpoints, one setting a line.
    key, account = _account_key(rng), _account(rng)
    lines = [
        "DefaultEndpointsProtocol=https;",
        f"BlobEndpoint=https://{account}.blob.core.windows.net;",
        f"QueueEndpoint=https://{account}.queue.core.windows.net;",
        f"AccountName={account};",
        f"AccountKey={key}",
    ]
    return "\n".join(lines), (key,)


def _cosmos_connection_string(rng: random.Random) -> Sample:
    key = _account_key(rng)
    return f"AccountEndpoint=https://{_account(rng)}.documents.azure.com:443/;AccountKey={key};", (key,)


def _shared_access_key(rng: random.Random) -> Sample:
    # Service Bus, Event Hubs and IoT Hub connection strings: a 256-bit key after `SharedAccessKey=`.
    key = _bytes64(rng, 32, 0xFF if rng.random() < 0.125 else None)
    namespace = _account(rng)
    text = rng.choice(
        [
            f"Endpoint=sb://{namespace}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
            f"SharedAccessKey={key}",
            f"Endpoint=sb://{namespace}.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={key};"
            "EntityPath=orders",
            f"HostName={namespace}.azure-devices.net;SharedAccessKeyName=iothubowner;SharedAccessKey={key}",
            f"HostName={namespace}.azure-devices.net;DeviceId=sensor-7;SharedAccessKey={key}",
        ]
    )
    return text, (key,)


def _signature(rng: random.Random, encoded: bool = True) -> str:
    sig = _bytes64(rng, 32)
    return quote(sig, safe="") if encoded else sig


def _sas_url(rng: random.Random) -> Sample:
    sig = _signature(rng)
    query = f"sp=r&st=2026-01-05T10:00:00Z&se=2026-01-06T10:00:00Z&spr=https&sv=2022-11-02&sr=b&sig={sig}"
    return f"https://{_account(rng)}.blob.core.windows.net/reports/q1.pdf?{query}", (sig,)


def _sas_connection_string(rng: random.Random) -> Sample:
    # An account SAS in a connection string; the signature may come first, and `&` may be written `&amp;`.
    sig, account, amp = _signature(rng), _account(rng), rng.choice(["&", "&amp;"])
    params = ["sv=2022-11-02", "ss=bf", "srt=sco", "sp=rwl", "se=2026-02-01T00:00:00Z", f"sig={sig}"]
    rng.shuffle(params)
    return (
        f"BlobEndpoint=https://{account}.blob.core.windows.net;\nFileEndpoint=https://{account}.file.core.windows.net;\n"
        f"SharedAccessSignature={amp.join(params)}",
        (sig,),
    )


def _service_bus_sas_token(rng: random.Random) -> Sample:
    sig = _signature(rng, encoded=rng.random() < 0.8)
    resource = quote(f"https://{_account(rng)}.servicebus.windows.net/orders", safe="")
    return f"SharedAccessSignature sr={resource}&sig={sig}&se=1767225600&skn=RootManageSharedAccessKey", (sig,)


# --- AWS ---------------------------------------------------------------------------------------------------------

_STS_PREFIXES = ("IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdz", "AQoDYXdz")


def _session_token(rng: random.Random) -> str:
    # Base64 throughout: each prefix is a whole number of base64 quanta, so random bytes may follow it.
    return rng.choice(_STS_PREFIXES) + _bytes64(rng, rng.randint(200, 700))


def _presigned_url(rng: random.Random) -> Sample:
    token = quote(_session_token(rng), safe="")
    query = (
        f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIA{draw(rng, UPPER_DIGITS, 16)}%2F20260105%2Fus-east-1"
        f"%2Fs3%2Faws4_request&X-Amz-Date=20260105T100000Z&X-Amz-Expires=3600&X-Amz-Security-Token={token}"
        f"&X-Amz-Signature={draw(rng, HEX, 64)}&X-Amz-SignedHeaders=host"
    )
    return f"https://{_account(rng)}.s3.us-east-1.amazonaws.com/export.csv?{query}", (token,)


def _mws_auth_token(rng: random.Random) -> str:
    return "amzn.mws." + str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _bedrock_api_key(rng: random.Random) -> str:
    # AWS's token generator: the SigV4-presigned `CallWithBearerToken` URL, without its scheme, `&Version=1`
    # after it, in base64, behind `bedrock-api-key-`.
    url = (
        "bedrock.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential=ASIA{draw(rng, UPPER_DIGITS, 16)}%2F20260105%2Fus-west-2%2Fbedrock%2Faws4_request"
        f"&X-Amz-Date=20260105T100000Z&X-Amz-Expires=43200"
        f"&X-Amz-Security-Token={quote(_session_token(rng), safe='')}"
        f"&X-Amz-Signature={draw(rng, HEX, 64)}&X-Amz-SignedHeaders=host&Version=1"
    )
    return "bedrock-api-key-" + base64.b64encode(url.encode()).decode()


# --- Google Cloud and Docker ------------------------------------------------------------------------------------


def _hmac_access_id(rng: random.Random) -> str:
    # 61 characters for a service account, 24 for a user account.
    return "GOOG" + (("1" + draw(rng, UPPER_DIGITS, 56)) if rng.random() < 0.7 else draw(rng, UPPER_DIGITS, 20))


_REGISTRIES = ("https://index.docker.io/v1/", "ghcr.io", "registry.gitlab.com", "quay.io", "acme.azurecr.io")


def _docker_config(rng: random.Random) -> Sample:
    registries = rng.sample(_REGISTRIES, 3)
    auths: dict[str, dict[str, str]] = {}
    secrets = []
    for registry in registries[:2]:
        login = f"{draw(rng, LOWER_DIGITS, 8)}:{draw(rng, ALNUM + '!#%', rng.randint(12, 24))}"
        auths[registry] = {"auth": base64.b64encode(login.encode()).decode()}
        secrets.append(auths[registry]["auth"])
    auths[registries[2]] = {"auth": "", "identitytoken": draw(rng, ALNUM + "-_.", 48)}
    secrets.append(auths[registries[2]]["identitytoken"])
    document = {"auths": auths, "HttpHeaders": {"User-Agent": "Docker-Client/27.3.1 (linux)"}}
    return json.dumps(document, indent=rng.choice([None, 2, "\t"])), tuple(secrets)


# One list of generators per format; `None` as a context list means the sample is written as it stands.
SAMPLES: dict[str, list[Generator]] = {
    "azure_account_key": [_storage_keys_list, _cosmos_keys_list, _account_key_beside_its_name],
    "azure_connection_string_key": [
        _storage_connection_string,
        _storage_connection_string_with_endpoints,
        _cosmos_connection_string,
    ],
    "azure_shared_access_key": [_shared_access_key],
    "azure_sas_signature": [_sas_url, _sas_connection_string, _service_bus_sas_token],
    "aws_session_token": [_token(_session_token), _presigned_url],
    "aws_mws_auth_token": [_token(_mws_auth_token)],
    "aws_bedrock_api_key": [_token(_bedrock_api_key)],
    "gcp_hmac_access_id": [_token(_hmac_access_id)],
    "docker_config_auth": [_docker_config],
}

# Structures are written alone, in a code span, or as the value of a setting; tokens in `CONTEXTS` (neutral).
_STRUCTURES = ("{}", "```\n{}\n```", "export CONFIG_VALUE='{}'", "value: '{}'\n")
_WHOLE = ("{}", "```json\n{}\n```", "$ cat ~/.docker/config.json\n{}\n")
PER_GENERATOR = 3


def _contexts(name: str, generator: Generator) -> tuple[str, ...]:
    if generator.__name__ == "<lambda>":
        return CONTEXTS
    if name in ("azure_account_key", "docker_config_auth"):
        return _WHOLE
    return _STRUCTURES


def cloud_rows(seed: int = 31) -> list[Labelled]:
    """The labelled table: every generator, in each of its contexts, a few draws each."""
    rng = random.Random(seed)
    rows = []
    for name, generators in SAMPLES.items():
        for generator in generators:
            for context in _contexts(name, generator):
                for _ in range(PER_GENERATOR):
                    written, secrets = generator(rng)
                    rows.append(Labelled(f"vendor:{name}", context.replace("{}", written), secrets))
    return rows


CLOUD_ROWS = cloud_rows()


def _near_misses(rng: random.Random) -> list[tuple[str, str]]:
    digest = _bytes64(rng, 64)
    return [
        # A bare 512-bit base64 value with no account-key word near it is a digest as often as a key.
        ("azure_account_key", f"the release digest was {digest} on every mirror"),
        ("azure_account_key", f'"node_modules/@azure/cosmos": {{"version": "4.2.0", "integrity": "sha512-{digest}"}}'),
        ("azure_account_key", "Storage account key: <your-account-key>"),
        ("azure_account_key", "Run `az storage account keys list` and copy the keyName you need."),
        # Connection strings with the key left to the reader.
        ("azure_connection_string_key", "DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey=<account-key>"),
        ("azure_connection_string_key", "AccountEndpoint=https://myacct.documents.azure.com:443/;AccountKey={{key}};"),
        ("azure_connection_string_key", "Set AccountKey= to one of the account's two access keys."),
        ("azure_connection_string_key", "UseDevelopmentStorage=true"),
        # The policy's name is not its key.
        ("azure_shared_access_key", "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=<your-key>"),
        ("azure_shared_access_key", "The SharedAccessKey= setting holds the policy's primary or secondary key."),
        # A signature of another length or alphabet, or none.
        ("azure_sas_signature", f"webhook verified: sig={draw(rng, HEX, 64)} ok"),
        ("azure_sas_signature", "the `sig=` field of a SAS token is its signature"),
        ("azure_sas_signature", "https://acme.blob.core.windows.net/c?sv=2022-11-02&sr=c&sp=rl&sig=<signature>"),
        # Placeholders cut short, and a prefix that names no issuer.
        ("aws_session_token", f"a token starts {_STS_PREFIXES[2]}{draw(rng, ALNUM, 4)}...<remainder of the token>"),
        ("aws_session_token", f"cached {_STS_PREFIXES[1]}{draw(rng, ALNUM, 40)} (truncated)"),
        ("aws_session_token", f"blob AQoE{_bytes64(rng, 240)} end"),
        ("aws_mws_auth_token", "GET /v2/authorizationTokens/amzn.mws.123456789?merchantId=A2EXAMPLE"),
        ("aws_mws_auth_token", "Pass the seller's MWS auth token (amzn.mws.<uuid>) with every call."),
        ("aws_bedrock_api_key", "export AWS_BEARER_TOKEN_BEDROCK=bedrock-api-key-..."),
        ("aws_bedrock_api_key", f"tag bedrock-api-key-{draw(rng, ALNUM, 60)} was rotated"),
        # Access IDs of the wrong length, and capitals that are an identifier.
        ("gcp_hmac_access_id", f"access id GOOG1{draw(rng, UPPER_DIGITS, 10)} (shortened)"),
        ("gcp_hmac_access_id", "export GOOGLE_APPLICATION_CREDENTIALS=/path/to/key.json"),
        ("gcp_hmac_access_id", f"id GOOG{draw(rng, UPPER_DIGITS, 40)} was listed"),
        # A `config.json` whose credentials live in a helper, and a sentence about the file.
        ("docker_config_auth", json.dumps({"auths": {"ghcr.io": {}}, "credsStore": "desktop"}, indent=2)),
        ("docker_config_auth", '{"auths": {"registry.example.com": {"auth": ""}}}'),
        ("docker_config_auth", 'Docker writes the "auths" key of config.json when a login succeeds.'),
        ("docker_config_auth", '{"auths": {"registry.example.com": {"auth": "<base64 of user:password>"}}}'),
    ]  # fmt: skip


NEAR_MISSES = _near_misses(random.Random(32))


def test_the_table_is_well_formed_and_covers_every_format() -> None:
    well_formed(CLOUD_ROWS)
    names = {f.name for f in CLOUD_FORMATS}
    assert len(names) == len(CLOUD_FORMATS)
    assert (
        {row.label for row in CLOUD_ROWS}
        == {f"vendor:{name}" for name in names}
        == {f"vendor:{name}" for name in SAMPLES}
    )
    assert {name for name, _ in NEAR_MISSES} == names


def test_every_row_is_redacted() -> None:
    assert misses(CLOUD_ROWS) == []


def test_every_row_is_detected() -> None:
    assert [row.text for row in CLOUD_ROWS if not has_likely_secret(row.text)] == []


@pytest.mark.parametrize(("name", "text"), NEAR_MISSES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(NEAR_MISSES)])
def test_a_near_miss_is_left_alone(name: str, text: str) -> None:
    assert sanitize_text(text).value == text
    assert not has_likely_secret(text)


def test_a_connection_string_keeps_everything_but_its_key() -> None:
    rng = random.Random(1)
    key, shared = _bytes64(rng, 64), _bytes64(rng, 32)
    storage = f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={key};EndpointSuffix=core.windows.net"
    cosmos = f"AccountEndpoint=https://acme.documents.azure.com:443/;AccountKey={key};"
    bus = f"Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={shared};EntityPath=q"
    assert sanitize_text(storage).value == (
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=[REDACTED];EndpointSuffix=core.windows.net"
    )
    assert sanitize_text(cosmos).value == "AccountEndpoint=https://acme.documents.azure.com:443/;AccountKey=[REDACTED];"
    assert sanitize_text(bus).value == (
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=[REDACTED];EntityPath=q"
    )


def test_a_key_that_reads_as_a_path_is_still_a_key() -> None:
    # `/` starts one key in 64; after `AccountKey=` the keyword rule takes it for a path, the format does not.
    key = _bytes64(random.Random(2), 64, 0xFF)
    assert key.startswith("/")
    result = sanitize_text(f"AccountName=acme;AccountKey={key};EndpointSuffix=core.windows.net")
    assert (result.value, result.report.text_redactions) == (
        "AccountName=acme;AccountKey=[REDACTED];EndpointSuffix=core.windows.net",
        1,
    )


def test_a_sas_keeps_its_permissions_and_expiry() -> None:
    sig = _signature(random.Random(3))
    first = f"SharedAccessSignature=sig={sig}&se=2026-02-01T00%3A00%3A00Z&sp=r"
    url = f"https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&sr=b&sp=r&sig={sig}&se=2026-02-01"
    assert sanitize_text(first).value == "SharedAccessSignature=sig=[REDACTED]&se=2026-02-01T00%3A00%3A00Z&sp=r"
    assert sanitize_text(url).value == (
        "https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&sr=b&sp=r&sig=[REDACTED]&se=2026-02-01"
    )


def test_a_docker_config_keeps_its_registries() -> None:
    text, secrets = _docker_config(random.Random(4))
    scrubbed = sanitize_text(text).value
    assert not any(secret in scrubbed for secret in secrets)
    document = json.loads(scrubbed)
    assert set(document["auths"]) == set(json.loads(text)["auths"])
    assert sum(entry.get("auth") == "[REDACTED]" for entry in document["auths"].values()) == 2
    assert document["HttpHeaders"] == {"User-Agent": "Docker-Client/27.3.1 (linux)"}


def test_a_session_token_is_one_redaction() -> None:
    token = _session_token(random.Random(5))
    result = sanitize_text(f"use {token} for the deploy")
    assert (result.value, result.report.text_redactions) == ("use [REDACTED] for the deploy", 1)


@pytest.mark.parametrize(
    "generator", [_token(_mws_auth_token), _token(_bedrock_api_key), _token(_hmac_access_id), _shared_access_key]
)
def test_the_spec_rules_know_none_of_these(generator: Generator) -> None:
    # The cloud formats belong to the default rules; `Policy.spec_compatible()` stays safety.md's 18 shapes.
    text, _ = generator(random.Random(6))
    assert sanitize_text(text, SPEC).value == text


def test_google_api_keys_and_oauth_client_secrets_were_already_covered() -> None:
    # Not new formats: `google_api_key` (`AIza`), `google_oauth_secret` (`GOCSPX-`), and the keyword rule for a
    # `client_secret.json` written before the prefix.
    rng = random.Random(7)
    api_key = "AIza" + draw(rng, ALNUM + "-_", 35)
    for secret in ("GOCSPX-" + draw(rng, ALNUM + "-_", 28), draw(rng, ALNUM + "-_", 24)):
        client_id = f"{draw(rng, '0123456789', 12)}-{draw(rng, LOWER_DIGITS, 32)}.apps.googleusercontent.com"
        installed = {"client_id": client_id, "client_secret": secret, "redirect_uris": ["http://localhost"]}
        document = json.dumps({"installed": installed})
        scrubbed = sanitize_text(document).value
        assert secret not in scrubbed and ".apps.googleusercontent.com" in scrubbed
    assert sanitize_text(f"gcloud services api-keys create -> {api_key}").value.endswith("[REDACTED]")
