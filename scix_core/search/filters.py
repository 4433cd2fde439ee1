"""Search filters: one frozen value, the same meaning in every lane and backend.

* ``year_min``/``year_max`` — inclusive; a paper without a year fails any year bound.
* ``categories`` — any of these codes (primary or cross-listed).
* ``authors`` — any author whose case-folded name contains one of these
  case-folded strings (``"smith"`` matches ``"J. Smith"``).
* ``paper_ids`` — only these papers.
* ``has_body`` — ``True``: only papers with full text; ``False``: only without.
* ``exclude_categories`` / ``exclude_authors`` — none of these (same matching as above).
* ``since`` — listed on or after this day (``"2026-06-01"``): the day a listing announced the paper
  (:attr:`scix_core.types.Paper.listed`); a paper never listed fails it.

Lexical lanes apply them in SQL before the candidate-pool cap; the dense
lane sends what Qdrant can express (years, categories, ids, listing days) as payload
filters and post-filters the rest with over-fetch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scix_core.errors import FilterError
from scix_core.vectors import VectorFilter

_LISTS = ("categories", "authors", "paper_ids", "exclude_categories", "exclude_authors")
_YEAR_RANGE = re.compile(r"^\s*(\d{4})?\s*(?:-|\.\.|–)\s*(\d{4})?\s*$|^\s*(\d{4})\s*$")


@dataclass(frozen=True)
class SearchFilters:
    year_min: int | None = None
    year_max: int | None = None
    categories: tuple[str, ...] = ()
    authors: tuple[str, ...] = ()
    paper_ids: tuple[str, ...] = ()
    has_body: bool | None = None
    exclude_categories: tuple[str, ...] = ()
    exclude_authors: tuple[str, ...] = ()
    since: dt.date | None = None

    def __post_init__(self) -> None:
        for name in _LISTS:
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v.strip() for v in value):
                raise FilterError(f"{name} must be a list of non-empty strings, got {value!r}")
            object.__setattr__(self, name, tuple(dict.fromkeys(v.strip() for v in value)))
        for name in ("year_min", "year_max"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise FilterError(f"{name} must be an integer year, got {value!r}")
        if self.year_min is not None and self.year_max is not None and self.year_min > self.year_max:
            raise FilterError(f"reversed year range: {self.year_min} > {self.year_max}")
        if self.since is not None:
            object.__setattr__(self, "since", parse_day(self.since))
        if self.has_body not in (None, True, False):
            raise FilterError(f"has_body must be true, false or unset, got {self.has_body!r}")

    def __bool__(self) -> bool:
        return self != SearchFilters()

    @property
    def author_needles(self) -> tuple[str, ...]:
        return tuple(a.casefold() for a in self.authors)

    @property
    def excluded_author_needles(self) -> tuple[str, ...]:
        return tuple(a.casefold() for a in self.exclude_authors)

    def vector_filter(self) -> VectorFilter:
        """The part a vector store evaluates as payload filters."""
        return VectorFilter(
            self.year_min,
            self.year_max,
            self.categories,
            self.paper_ids,
            self.exclude_categories,
            listed_min=self.since.toordinal() if self.since else None,
        )

    @property
    def needs_post_filter(self) -> bool:
        """True when some condition (authors, has_body) is not in the vector payload."""
        return bool(self.authors or self.exclude_authors) or self.has_body is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            k: list(v) if isinstance(v, tuple) else v.isoformat() if isinstance(v, dt.date) else v
            for k, v in dataclasses.asdict(self).items()
            if v not in (None, ())
        }

    @classmethod
    def parse(cls, spec: SearchFilters | Mapping[str, Any] | None) -> SearchFilters:
        """From a mapping: the field names above, plus ``year`` as ``"2019-2021"``, ``2020`` or ``(2019,
        2021)``."""
        if spec is None:
            return cls()
        if isinstance(spec, SearchFilters):
            return spec
        if not isinstance(spec, Mapping):
            raise FilterError(f"filters must be a mapping, got {type(spec).__name__}")
        valid = {f.name for f in dataclasses.fields(cls)} | {"year"}
        unknown = sorted(set(spec) - valid)
        if unknown:
            raise FilterError(
                f"unknown filter key(s) {', '.join(map(repr, unknown))}; valid: {', '.join(sorted(valid))}"
            )
        fields = {k: v for k, v in spec.items() if k != "year" and v is not None}
        for name in _LISTS:
            if isinstance(fields.get(name), str):
                fields[name] = (fields[name],)
            if name in fields:
                fields[name] = tuple(fields[name])
        if spec.get("year") is not None:
            fields["year_min"], fields["year_max"] = parse_year_range(spec["year"])
        return cls(**fields)


def parse_day(value: Any) -> dt.date:
    """``"2026-06-01"`` or a date -> that date; a :class:`FilterError` for anything else."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip())
    except ValueError:
        raise FilterError(f"since must be a day as YYYY-MM-DD, got {value!r}") from None


def parse_year_range(value: Any) -> tuple[int | None, int | None]:
    """``"2019-2021"``, ``"2019-"``, ``"-2021"``, ``"2020"``, ``2020`` or a pair -> (min, max)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
        if all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in (lo, hi)):
            return lo, hi
    if isinstance(value, str):
        m = _YEAR_RANGE.match(value)
        if m and (m.group(1) or m.group(2) or m.group(3)):
            if m.group(3):
                return int(m.group(3)), int(m.group(3))
            return (int(m.group(1)) if m.group(1) else None), (int(m.group(2)) if m.group(2) else None)
    raise FilterError(f"year must look like 2019-2021, 2019-, -2021 or 2020; got {value!r}")
