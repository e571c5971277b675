"""Document conversion (docs/spec/sources-and-documents.md §10.5–10.8): bytes in, markdown out, or a contract error.

`convert_document` runs the size check, sniffing and a `ConverterChain` in this process. `ConverterPool`
runs the same in worker processes under a time limit and a memory ceiling, and is how a host converts files
it did not write. The `NativeConverter` keeps markdown, plain text and code byte-exact; the `ImageConverter`
reads images by OCR (Tesseract, `OcrSettings`); the `OfficeConverter` hands everything else to markitdown
(pdfminer.six for PDF, so page breaks survive, and OCR for the pages without a text layer).
"""

from pipeline.convert.chain import ConverterChain, convert_document, convert_natively, default_chain, native_chain
from pipeline.convert.converter import DocumentConverter
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.limits import (
    MAX_DECOMPRESSED_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_SPREADSHEET_DENSE_CELLS,
    ConvertLimits,
)
from pipeline.convert.native import NativeConverter
from pipeline.convert.ocr import OcrSettings, ocr_unavailable
from pipeline.convert.office import OfficeConverter
from pipeline.convert.pool import ConverterPool
from pipeline.convert.scans import ImageConverter

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "MAX_DOCUMENT_BYTES",
    "MAX_SPREADSHEET_DENSE_CELLS",
    "ConvertLimits",
    "ConvertedDocument",
    "ConverterChain",
    "ConverterPool",
    "DocumentConverter",
    "ImageConverter",
    "NativeConverter",
    "OcrSettings",
    "OfficeConverter",
    "RawDocument",
    "convert_document",
    "convert_natively",
    "default_chain",
    "native_chain",
    "ocr_unavailable",
]
