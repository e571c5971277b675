"""Legacy import routes (admin tokens only), through `worker.control`: start an import of a v1 workspace,
follow it by its record.

A start is answered 202 at once with the record (`Location` names where to follow it); the import runs on
the workers, or in this process when the state is embedded. The path is read where the import runs.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from tinymemory_ingest.api.auth import AdminDep, ServicesDep
from worker import control
from worker.control import LegacyImportRecord, LegacyImportRequest

router = APIRouter(prefix="/v1", tags=["admin"])


@router.post("/legacy-imports", response_model=LegacyImportRecord, status_code=202)
async def start_legacy_import(body: LegacyImportRequest, _: AdminDep, services: ServicesDep) -> JSONResponse:
    """Import (or resume importing) a v1 TinyCortex workspace into the engine."""
    record = await control.start_legacy_import(services, body)
    return JSONResponse(
        record.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/legacy-imports/{record.id}"}
    )


@router.get("/legacy-imports", response_model=list[LegacyImportRecord])
async def legacy_imports(_: AdminDep, services: ServicesDep) -> JSONResponse:
    """Every legacy import, most recently updated first."""
    return JSONResponse([record.model_dump(mode="json") for record in control.legacy_imports(services)])


@router.get("/legacy-imports/{import_id}", response_model=LegacyImportRecord)
async def legacy_import_status(import_id: str, _: AdminDep, services: ServicesDep) -> JSONResponse:
    """One import: where it stands, its checkpoint, what it stored, replayed and skipped."""
    return JSONResponse(control.legacy_import_status(services, import_id).model_dump(mode="json"))
