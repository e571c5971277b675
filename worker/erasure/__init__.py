"""Erasure of a source or an account (a namespace subtree), for good, with a receipt: everything of the feature.

    request     what is asked (`ErasureTarget`, `ErasureRequest`), the audit record it ends in
                (`ErasureReceipt`), and what keeps erased memory erased (`Tombstone`, `scopes_over`)
    operations  what the front ends call: `request_erasure`, `erasure_status`, `refuse_erased_store`
    job         `run_erasure`: tombstone, stop, drain the running jobs, erase, purge, verify, receipt
    runner      `InProcessErasures`: erasures run in this process (embedded mode); the erase workers run
                the same job (`worker.cluster`)
    guard       `ErasureGuard`: what keeps a legacy import from re-filling what an erasure erased

The HTTP routes are `tinymemory_ingest.api.routes.erasure`, the command `tinymemory erase`
(`tinymemory_ingest.cli.erase`). The state stores keep receipts and tombstones (`worker.state`), so they import
`request`; modules are therefore imported by path, and this package re-exports nothing.
"""
