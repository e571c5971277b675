"""The operations every front end calls: the command line, the API's admin routes, the console, the erasure job.

Plain functions over the state store and, where they need them, the engine and a `SyncRunner` (the embedded
runtime syncs here, the Celery one queues). Each returns a typed result; an ordinary mistake (an unknown
source id, a target its kind cannot read) is a contract error whose message says what to do.

    sources   source_kinds, add_source, ensure_local_source, list_sources, get_source, show_source,
              set_enabled, remove_source, sync_now
    status    status
    vectors   vector_backlog, engine_vector_backlog (an engine's background vectors: waiting, rate, ETA:
              `VectorLane`), eta_seconds, format_eta, format_rate, describe_vectors
    runs      runs (the syncs in progress and the last ones done: `RunBoard`)
    letters   dead_letters, letter_id, replay_dead_letter, replay_dead_letters, purge_dead_letters
    erasures  request_erasure, erasure_status (an `ErasureRunner` runs them: here, or the erase workers),
              refuse_erased_store
    tools     guarded_tools (the agent tools: a store is scrubbed, and refused into what was erased)
    tokens    add_token, list_tokens, revoke_token, authenticate, check_listen
    legacy    start_legacy_import, legacy_import_status, legacy_imports (v1 TinyCortex workspaces)

`Services` (`control.services`) opens what they run against from the settings.
"""

from sources import SourceEntry, SourceRequest
from worker.control.letters import dead_letters, letter_id, purge_dead_letters, replay_dead_letter, replay_dead_letters
from worker.control.results import (
    ClusterProbe,
    Replay,
    RunBoard,
    SourceDetail,
    SourceKindInfo,
    SourceRemoval,
    SourceStatus,
    Status,
    SyncRunner,
    VectorBacklogStatus,
)
from worker.control.services import Services
from worker.control.sources import (
    add_source,
    ensure_local_source,
    get_source,
    list_sources,
    remove_source,
    set_enabled,
    show_source,
    source_kinds,
    sync_now,
)
from worker.control.status import runs, status
from worker.control.tokens import (
    Caller,
    NewToken,
    TokenInfo,
    add_token,
    authenticate,
    check_listen,
    list_tokens,
    revoke_token,
)
from worker.control.tools import guarded_tools
from worker.control.vectors import (
    VectorLane,
    VectorReading,
    describe_vectors,
    engine_vector_backlog,
    eta_seconds,
    format_eta,
    format_rate,
    vector_backlog,
)
from worker.erasure.operations import (
    CLI_CALLER,
    ErasureRunner,
    erasure_status,
    refuse_erased_store,
    request_erasure,
)
from worker.erasure.request import ErasureReceipt, ErasureTarget
from worker.legacy.job import LegacyImportRecord, LegacyImportRequest
from worker.legacy.operations import legacy_import_status, legacy_imports, start_legacy_import
from worker.records import DeadLetter, SyncOutcome
from worker.runs import RunView
from worker.token_store import TokenStore

__all__ = [
    "CLI_CALLER",
    "Caller",
    "ClusterProbe",
    "DeadLetter",
    "ErasureReceipt",
    "ErasureRunner",
    "ErasureTarget",
    "LegacyImportRecord",
    "LegacyImportRequest",
    "NewToken",
    "Replay",
    "RunBoard",
    "RunView",
    "Services",
    "SourceDetail",
    "SourceEntry",
    "SourceKindInfo",
    "SourceRemoval",
    "SourceRequest",
    "SourceStatus",
    "Status",
    "SyncOutcome",
    "SyncRunner",
    "TokenInfo",
    "TokenStore",
    "VectorBacklogStatus",
    "VectorLane",
    "VectorReading",
    "add_source",
    "add_token",
    "authenticate",
    "check_listen",
    "dead_letters",
    "describe_vectors",
    "engine_vector_backlog",
    "ensure_local_source",
    "erasure_status",
    "eta_seconds",
    "format_eta",
    "format_rate",
    "get_source",
    "guarded_tools",
    "legacy_import_status",
    "legacy_imports",
    "letter_id",
    "list_sources",
    "list_tokens",
    "purge_dead_letters",
    "refuse_erased_store",
    "remove_source",
    "replay_dead_letter",
    "replay_dead_letters",
    "request_erasure",
    "revoke_token",
    "runs",
    "set_enabled",
    "show_source",
    "source_kinds",
    "start_legacy_import",
    "status",
    "sync_now",
    "vector_backlog",
]
