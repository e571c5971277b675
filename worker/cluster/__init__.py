"""The distributed pipeline: the Celery app (`cluster.app`), its thin tasks (`cluster.tasks`), the worker
process's runtime and sync enqueueing (`cluster.runtime`), the queues (`cluster.queues`), metrics
(`cluster.metrics`), the source watchers (`cluster.watchers`) and what `status` reads of it (`cluster.status`).
Modules are imported by path: importing one must not start Celery or prometheus_client early."""
