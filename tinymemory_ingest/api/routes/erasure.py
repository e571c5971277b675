"""Erasure routes (admin tokens only), through `worker.control`: ask for an erasure, read its receipt.

A request is answered 202 at once with the receipt (its id, `Location` naming where to follow it); the
erasure runs on the erase workers, or in this process when the state is embedded. The receipt records the
token's name as who asked.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from tinymemory_ingest.api.auth import AdminDep, ServicesDep
from worker import control
from worker.control import ErasureReceipt, ErasureTarget

router = APIRouter(prefix="/v1", tags=["admin"])

UNNAMED_CALLER = "loopback"
"""Who asked, in a receipt, when the API has no tokens (it then answers only requests made on loopback)."""


@router.post("/erasures", response_model=ErasureReceipt, status_code=202)
async def request_erasure(body: ErasureTarget, caller: AdminDep, services: ServicesDep) -> JSONResponse:
    """Erase a source (`source_id`) or a namespace subtree (`namespace`), optionally only some `kinds`, for good.

    The same request while an earlier one is queued, running or completed answers that one's receipt.
    """
    receipt = await control.request_erasure(services.state(), services.erasures(), body, caller.name or UNNAMED_CALLER)
    return JSONResponse(
        receipt.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/erasures/{receipt.id}"}
    )


@router.get("/erasures/{erasure_id}", response_model=ErasureReceipt)
async def erasure_status(erasure_id: str, _: AdminDep, services: ServicesDep) -> JSONResponse:
    """An erasure's receipt: what was asked, by which token, when, what it did and what the check found."""
    return JSONResponse(control.erasure_status(services.state(), erasure_id).model_dump(mode="json"))
