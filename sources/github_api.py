"""GitHub as a GitHub source reaches it: repository names, web URLs, and the REST API through PyGithub's
client, the answers' shapes and its failures.

Requests go through PyGithub's `Requester` (its auth, base URL handling and connection pool) to the routes
docs/spec/sources-and-documents.md §7 names, and the JSON answers are validated into the small models below rather than
into PyGithub's own objects: those complete themselves with one more request whenever a field is absent (every listed
issue that is not a pull request lacks `pull_request`, which would cost a request per issue), and a model fails cleanly
on a broken answer. PyGithub is configured for a worker: no pause between requests, a timeout, and retries only for
connections that fail, never sleeping on a rate limit; a limit reached is an `UnavailableError` saying when to retry, so
the host tries again later instead of recording a failure.

Failures become contract errors here, naming the repository and what was being read, never the token:

    rate limit (403/429 with X-RateLimit-Remaining: 0 or Retry-After)   UnavailableError, saying when
    5xx, connection failure, timeout                                  UnavailableError
    401                                                               InvalidRequestError about the token
    403 otherwise                                                     InvalidRequestError about access
    404, 410                                                          NotFoundError naming what is missing
    anything else, an answer that does not parse                      EngineError
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from github import Auth, Github, GithubException, RateLimitExceededException
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from urllib3.util import Retry

from engines.contract import EngineError, Error, InvalidRequestError, NotFoundError, UnavailableError

PER_PAGE: Final = 100
MAX_PAGES: Final = 1000  # docs/spec/sources-and-documents.md §7.3: pages of 100 until a short page, at most 1000 pages

_OWNER: Final = r"(?P<owner>[A-Za-z0-9][A-Za-z0-9-]{0,38})"
_NAME: Final = r"(?P<name>[A-Za-z0-9._-]{1,100})"
_REPO_FORMS: Final = (
    re.compile(rf"(?i:https?://github\.com)/{_OWNER}/{_NAME}/?"),
    re.compile(rf"(?i:git@github\.com):{_OWNER}/{_NAME}"),
    re.compile(rf"{_OWNER}/{_NAME}"),
)
_SHA: Final = r"^[0-9a-f]{40}([0-9a-f]{24})?$"  # SHA-1, or SHA-256 object names
_SERVER_MESSAGE_CHARS: Final = 200

Model = TypeVar("Model", bound=BaseModel)


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RepoInfo(_Shape):
    default_branch: str


class Person(_Shape):
    name: str = ""
    email: str = ""
    date: datetime


class CommitData(_Shape):
    message: str = ""
    author: Person
    committer: Person


class CommitRow(_Shape):
    sha: str = Field(pattern=_SHA)
    commit: CommitData
    html_url: str | None = None


class BranchInfo(_Shape):
    commit: CommitRow


class TreeEntry(_Shape):
    path: str = Field(min_length=1)
    mode: str
    type: str
    sha: str = Field(pattern=_SHA)
    size: int | None = Field(default=None, ge=0)


class Tree(_Shape):
    sha: str = Field(pattern=_SHA)
    tree: list[TreeEntry]
    truncated: bool = False


class Blob(_Shape):
    sha: str = Field(pattern=_SHA)
    size: int = Field(ge=0)
    content: str
    encoding: str = "base64"


class ChangedFile(_Shape):
    filename: str = Field(min_length=1)
    status: str
    previous_filename: str | None = None


class Comparison(_Shape):
    status: str
    files: list[ChangedFile] = Field(default_factory=list)


class User(_Shape):
    login: str


class Label(_Shape):
    name: str


class IssueRow(_Shape):
    """An issue or a pull request (`merged_at` only for pull requests; `pull_request` marks one listed as an
    issue)."""

    number: int = Field(gt=0)
    title: str = ""
    state: str = ""
    body: str | None = None
    user: User | None = None
    labels: list[Label] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime
    html_url: str | None = None
    pull_request: dict[str, Any] | None = None
    merged_at: datetime | None = None


class CommentRow(_Shape):
    user: User | None = None
    body: str | None = None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RepoRef:
    """A repository on GitHub, as `owner/name`."""

    owner: str
    name: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def url(self) -> str:
        return f"https://github.com/{self.full_name}"


def parse_repo(target: str) -> RepoRef:
    """The repository a target names (docs/spec/sources-and-documents.md §7.1): `https://github.com/OWNER/REPO` (or
    `http://`), optionally ending in `.git` and/or `/`, `git@github.com:OWNER/REPO[.git]`, or `OWNER/REPO`; anything
    deeper is refused."""
    text = target.strip()
    for form in _REPO_FORMS:
        match = form.fullmatch(text)
        if match is not None:
            name = match["name"].removesuffix(".git")
            if name not in ("", ".", ".."):
                return RepoRef(match["owner"], name)
    raise InvalidRequestError(
        f"not a github repository: {target!r}; give https://github.com/OWNER/REPO, git@github.com:OWNER/REPO "
        "or OWNER/REPO"
    )


@dataclass(frozen=True, slots=True)
class TokenChoice:
    """The token a source sends (None: none) and where it came from, named in the message of a refused one.

    `missing` is set when the token the entry names is not there: the first request raises it, so building a
    reader (to see whether it can be watched, say) never fails on it.
    """

    value: str | None = field(default=None, repr=False)
    origin: str = "whether the repository needs a token (none was given)"
    missing: str | None = None


def web_origin(api_url: str) -> str:
    """Where a person browses the repositories an API serves: github.com for the public API, else the API's
    own origin and path without GitHub Enterprise's `/api/v3` (`https://ghe.example/api/v3` serves
    `https://ghe.example`)."""
    base = api_url.rstrip("/")
    scheme, _, rest = base.partition("://")
    host, slash, path = rest.partition("/")
    host = host.rpartition("@")[2]  # never carry credentials into metadata
    if host.lower() == "api.github.com":
        return "https://github.com"
    path = (slash + path).removesuffix("/api/v3")
    return f"{scheme}://{host}{path}"


class GithubApi:
    """GET requests to one repository's routes, translated to contract errors (module docstring).

    `repo` is `owner/name`.
    Requests are made one at a time: PyGithub's connection object keeps each request's arguments on itself
    until the response comes, so two threads must never share it at once.
    """

    def __init__(self, base_url: str, repo: str, *, token: TokenChoice, timeout_s: float, user_agent: str) -> None:
        self.repo = repo
        self.token = token
        # Connections that fail are retried twice, quickly; a status never is (a rate limit must not sleep).
        retry = Retry(
            total=2,
            connect=2,
            read=1,
            status=0,
            backoff_factor=0.25,
            status_forcelist=(),
            allowed_methods=frozenset({"GET"}),
            respect_retry_after_header=False,
            raise_on_status=False,
        )
        client = Github(
            base_url=base_url.rstrip("/"),
            auth=Auth.Token(token.value) if token.value else None,
            timeout=max(1, math.ceil(timeout_s)),
            user_agent=user_agent,
            per_page=PER_PAGE,
            retry=retry,
            seconds_between_requests=None,
            seconds_between_writes=None,
            lazy=True,
        )
        self._requester = client.requester
        self._lock = threading.Lock()
        # Hosts drop readers without closing them; the pooled connections must not outlive the reader.
        weakref.finalize(self, client.close)

    def get(self, route: str, shape: type[Model], *, what: str, params: Mapping[str, Any] | None = None) -> Model:
        """`GET /repos/{repo}/{route}` as `shape`; `what` names the thing read, in errors."""
        return _parsed(self._get(route, what, params), shape, what)

    def pages(
        self, route: str, shape: type[Model], *, what: str, params: Mapping[str, Any], per_page: int = PER_PAGE
    ) -> Iterator[Model]:
        """The rows of a paged listing, fetched a page at a time while the caller takes them: pages of
        `per_page` until a short page, at most `MAX_PAGES`."""
        for page in range(1, MAX_PAGES + 1):
            rows = self._get(route, what, {**params, "per_page": per_page, "page": page})
            if not isinstance(rows, list):
                raise EngineError(f"github answered {what} of {self.repo} with something other than a list")
            for row in rows:
                yield _parsed(row, shape, what)
            if len(rows) < per_page:
                return

    def _get(self, route: str, what: str, params: Mapping[str, Any] | None) -> Any:
        if self.token.missing is not None:
            raise InvalidRequestError(self.token.missing)
        url = f"/repos/{self.repo}/{route}" if route else f"/repos/{self.repo}"
        try:
            with self._lock:
                _, data = self._requester.requestJsonAndCheck("GET", url, parameters=dict(params or {}))
        except GithubException as err:
            raise self._error(err, what) from err
        except OSError as err:  # requests' connection errors and timeouts are OSErrors
            raise UnavailableError(
                f"github api unreachable while reading {what} of {self.repo} ({type(err).__name__}); try again later"
            ) from err
        except RuntimeError as err:  # PyGithub refuses a redirect to another host or scheme
            raise EngineError(f"github api redirected elsewhere while reading {what} of {self.repo}") from err
        return data

    def _error(self, err: GithubException, what: str) -> Error:
        status = err.status
        subject = f"{what} of {self.repo}"
        when = _retry_when(err)
        if when is not None:
            return UnavailableError(f"github rate limit reached while reading {subject}; retry {when}")
        if status == 401:
            return InvalidRequestError(
                f"github refused the token (401) while reading {subject}; check {self.token.origin}"
            )
        if status == 403:
            return InvalidRequestError(
                f"github refused access (403: {_server_message(err)}) to {subject}; check {self.token.origin}"
            )
        if status in (404, 410):
            return NotFoundError(f"{subject} not found on github ({status})")
        if status >= 500:
            return UnavailableError(f"github answered {status} while reading {subject}; try again later")
        return EngineError(f"github answered {status} ({_server_message(err)}) while reading {subject}")


def _parsed(data: Any, shape: type[Model], what: str) -> Model:
    try:
        return shape.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        raise EngineError(
            f"github answered {what} in a shape this reader cannot read ({where}: {first['msg']})"
        ) from None


def _retry_when(err: GithubException) -> str | None:
    """When a refusal that is a rate limit may be retried (None: it is not one)."""
    if err.status not in (403, 429):
        return None
    headers = {str(k).lower(): str(v) for k, v in (err.headers or {}).items()}
    after = headers.get("retry-after", "").strip()
    if after.isdigit():
        return f"in {int(after)} s"
    reset = headers.get("x-ratelimit-reset", "").strip()
    if headers.get("x-ratelimit-remaining") == "0":
        if reset.isdigit():
            at = datetime.fromtimestamp(int(reset), UTC)
            wait = max(0, math.ceil((at - datetime.now(UTC)).total_seconds()))
            return f"after {at.strftime('%Y-%m-%dT%H:%M:%SZ')} (in {wait} s)"
        return "later"
    if isinstance(err, RateLimitExceededException) or err.status == 429:
        return "later"
    return None


def _server_message(err: GithubException) -> str:
    """GitHub's own message, short and on one line (it names the resource, never the request's headers)."""
    data = err.data
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, str) or not message.strip():
        return "no message"
    text = " ".join(message.split())
    return text if len(text) <= _SERVER_MESSAGE_CHARS else text[:_SERVER_MESSAGE_CHARS] + "…"
