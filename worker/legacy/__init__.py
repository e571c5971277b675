"""Running an import of a v1 TinyCortex workspace: the job, the operations the front ends call, and its task.

    job         `import_legacy`: the workspace copied into the engine as a resumable job, with its record
                (`LegacyImportRecord`) and the lock that keeps one import of a workspace running at a time
    operations  what the API and the console call: `start_legacy_import`, `legacy_import_status`,
                `legacy_imports`
    tasks       the `tm.backfill` Celery task that runs the job in time slices on the workers

Reading and mapping the workspace is `pipeline.legacy`. Modules are imported by path, so that importing the
job never imports Celery; this package re-exports nothing.
"""
