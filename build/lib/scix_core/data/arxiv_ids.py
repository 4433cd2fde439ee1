"""arXiv identifiers: publication month, category codes, id repair.

A paper's revision date makes old classics look new, so wherever a source
gives no first-publication date the month is decoded from the id itself
(reference design "Phase 8": trending by id month).
"""

from __future__ import annotations

import datetime as dt
import re

_NEW_STYLE = re.compile(r"^(?:arXiv:)?(\d{2})(\d{2})\.\d{4,5}(?:v\d+)?$")
_OLD_STYLE = re.compile(r"^(?:arXiv:)?[a-z\-]+(?:\.[A-Z]{2})?/(\d{2})(\d{2})\d{3}(?:v\d+)?$")
_CATEGORY = re.compile(r"[a-z\-]+(\.[A-Za-z\-]+)?")
_FLOAT_ID = re.compile(r"^(\d{3,4})\.(\d{1,5})$")


def published_from_id(arxiv_id: str) -> dt.date | None:
    """First day of the submission month encoded in an arXiv id, or None.

    >>> published_from_id("2103.01234v2")
    datetime.date(2021, 3, 1)
    >>> published_from_id("hep-th/9901001")
    datetime.date(1999, 1, 1)
    """
    m = _NEW_STYLE.match(arxiv_id.strip()) or _OLD_STYLE.match(arxiv_id.strip())
    if not m:
        return None
    yy, mm = int(m.group(1)), int(m.group(2))
    if not 1 <= mm <= 12:
        return None
    year = 1900 + yy if yy >= 91 else 2000 + yy  # arXiv began in August 1991
    return dt.date(year, mm, 1)


def is_arxiv_category(code: str) -> bool:
    """True for arXiv category codes (``cs.AI``, ``hep-th``); False for ACM/MSC codes."""
    return _CATEGORY.fullmatch(code) is not None


def arxiv_categories(codes: object) -> tuple[str, ...]:
    """Keep arXiv codes only, in order, without repeats (primary stays first)."""
    raw = codes.split() if isinstance(codes, str) else list(codes or ())
    kept: dict[str, None] = {}
    for code in raw:
        code = str(code).strip()
        if is_arxiv_category(code):
            kept.setdefault(code, None)
    return tuple(kept)


def repair_float_id(raw: str) -> str:
    """Undo a float conversion of a new-style id: ``704.001`` -> ``0704.0010``.

    Ids that are not float-mangled are returned unchanged.
    """
    raw = raw.strip()
    m = _FLOAT_ID.match(raw)
    if not m:
        return raw
    head, tail = m.groups()
    width = 5 if int(head) >= 1501 else 4  # five-digit numbers from 2015-01 on
    return f"{head.zfill(4)}.{tail.ljust(width, '0')}"
