"""Cloud credentials beyond the access keys of `vendors`: Azure storage keys, connection strings, SAS
tokens and Cosmos DB keys; AWS and GCP credentials other than key pairs and service-account JSON; Docker registry auth.

Each format is written from the vendor's own documentation of its tokens; the module is a table for `vendors`.
"""

from __future__ import annotations

from pipeline.scrub.vendor_format import VendorFormat

CLOUD_FORMATS: tuple[VendorFormat, ...] = ()
