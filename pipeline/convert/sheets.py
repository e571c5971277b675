"""The dense-cell cap on spreadsheets, checked before a spreadsheet library parses them
(docs/spec/sources-and-documents.md §10.5 "Spreadsheets").

A workbook is dense once parsed: pandas materialises every cell from A1 to the last used row and column of
each sheet, so a sheet with one cell in A1 and one in XFD1048576 costs seventeen billion cells. The cap is on
that dense size, summed over the sheets, and is read from the worksheet XML (XLSX) or from the legacy
sheets' dimensions (XLS) before the conversion starts.
"""

from __future__ import annotations

import importlib
import re
import zipfile
from typing import Any

from engines.contract import InvalidRequestError
from pipeline.convert.documents import RawDocument
from pipeline.convert.limits import ConvertLimits

_WORKSHEET = re.compile(r"xl/worksheets/[^/]+\.xml")
# Cell and row elements, with or without a namespace prefix, and the references they carry.
_CELL_REF = re.compile(rb"<(?:\w+:)?c\b[^>]*?\sr=\"([A-Z]{1,3})[0-9]+\"")
_ROW_REF = re.compile(rb"<(?:\w+:)?row\b[^>]*?\sr=\"([0-9]+)\"")
_CELL = re.compile(rb"<(?:\w+:)?c[\s/>]")
_ROW = re.compile(rb"<(?:\w+:)?row[\s/>]")


def check_xlsx_cells(archive: zipfile.ZipFile, raw: RawDocument, limits: ConvertLimits) -> None:
    """Refuse a workbook whose sheets' dense used ranges add up to more than the cell limit.

    The archive's declared sizes have already been checked, so reading each worksheet whole is bounded.
    """
    total = 0
    for name in archive.namelist():
        if _WORKSHEET.fullmatch(name):
            total += dense_cells(archive.read(name))
            _refuse_over(total, raw, limits)


def dense_cells(sheet_xml: bytes) -> int:
    """Rows times columns of the range from A1 to the sheet's last referenced row and column.

    Cells and rows may omit their references (they then follow the previous one), so the count of cell
    and row elements is a floor under both numbers: a sheet cannot hide cells by leaving out `r`.
    """
    columns = max((_column_number(letters) for letters in set(_CELL_REF.findall(sheet_xml))), default=0)
    rows = max((int(number) for number in _ROW_REF.findall(sheet_xml)), default=0)
    rows = max(rows, len(_ROW.findall(sheet_xml)))
    return max(rows * columns, len(_CELL.findall(sheet_xml)))


def check_xls_cells(raw: RawDocument, limits: ConvertLimits) -> None:
    """Refuse a legacy workbook whose sheets' dense ranges add up to more than the cell limit.

    xlrd loads one sheet at a time on demand, so each is released before the next is read; the XLS format
    itself caps a sheet at 65,536 rows by 256 columns.
    """
    book = _open_xls(raw)
    try:
        total = 0
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            total += sheet.nrows * sheet.ncols
            book.unload_sheet(index)
            _refuse_over(total, raw, limits)
    finally:
        book.release_resources()


def _open_xls(raw: RawDocument) -> Any:
    # xlrd has no type hints; it is imported here because only a worker reading a legacy workbook needs it.
    xlrd = importlib.import_module("xlrd")
    return xlrd.open_workbook(file_contents=raw.data, on_demand=True, logfile=_Discard())


def _refuse_over(total: int, raw: RawDocument, limits: ConvertLimits) -> None:
    if total > limits.max_spreadsheet_cells:
        raise InvalidRequestError(
            f"{raw.label} has more than {limits.max_spreadsheet_cells:,} cells in its sheets' used ranges "
            f"({total:,} counted so far); split the workbook or export the sheets you need as CSV"
        )


def _column_number(letters: bytes) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + letter - 64
    return number


class _Discard:
    """A log file for xlrd that drops its warnings about odd but readable workbooks."""

    def write(self, text: str) -> int:
        return len(text)
