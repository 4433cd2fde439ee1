"""``scix data harvest arxiv``: new arXiv listings through arXiv's OAI-PMH interface, as day files.

``ListRecords`` with ``metadataPrefix=arXiv`` over a set (``cs``,
``physics:astro-ph``, ``math`` …) and a datestamp window, page after page by
resumption token, ``delay_s`` (3 s, arXiv's politeness interval) between
requests. A 503 is retried after its ``Retry-After``; a cut connection or a
truncated page is retried after the delay; each up to ``retries`` times in a
row. Every page is kept as it arrives (``DEST/.harvest/``, with the token of
the next one), so an interrupted harvest — killed, or out of retries — run
again with the same arguments continues from the last page kept; a token the
server no longer accepts (``badResumptionToken``: tokens expire) starts the
list again, once. When the list is complete the records are written as one
file per datestamp, ``DEST/YYYY-MM-DD.jsonl`` (the schema of the shared
listings: ``id``, ``title``, ``summary``, ``authors``, ``categories``,
``comment``, ``abs``, ``pdf``; a day already there is merged, the newest record
of an id kept), which ``scix ingest --format arxiv-jsonl`` reads. Deleted
records are skipped; ``category`` keeps only records listed in it.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path

from scix_core.errors import ConfigError, DataFormatError, DataPathError
from scix_core.workspace import write_text_atomic

ARXIV_OAI = "https://oaipmh.arxiv.org/oai"
OAI = "{http://www.openarchives.org/OAI/2.0/}"
ARXIV = "{http://arxiv.org/OAI/arXiv/}"
STATE = "state.json"
MAX_WAIT_S = 600.0  # a Retry-After longer than this is an error, not a wait


@dataclass(frozen=True)
class Request:
    """What one harvest asks for; the pages kept belong to exactly this request."""

    set: str
    start: dt.date
    until: dt.date | None = None
    category: str | None = None
    url: str = ARXIV_OAI

    def first(self) -> dict[str, str]:
        params = {
            "verb": "ListRecords",
            "metadataPrefix": "arXiv",
            "set": self.set,
            "from": self.start.isoformat(),
        }
        if self.until:
            params["until"] = self.until.isoformat()
        return params

    def key(self) -> dict:
        return {"set": self.set, "from": self.start.isoformat(), "until": str(self.until), "url": self.url}


@dataclass
class HarvestReport:
    pages: int = 0
    records: int = 0
    deleted: int = 0
    outside_category: int = 0
    retries: int = 0
    restarts: int = 0
    resumed_from_page: int = 0
    days: dict[str, int] = field(default_factory=dict)  # file name -> records written into it


class BadToken(Exception):
    """The server refused a resumption token (it expired, or it was never its own)."""


def _text(node: ET.Element | None, tag: str) -> str:
    child = node.find(tag) if node is not None else None
    return " ".join((child.text or "").split()) if child is not None else ""


def parse_page(body: bytes, where: str) -> tuple[list[tuple[str, dict | None]], str | None]:
    """(datestamp, record or None for a deleted one) of every record of one page, and the next token
    (None: the list is complete). A body that is not XML raises ``ET.ParseError`` (a page cut short: the
    caller asks again)."""
    root = ET.fromstring(body)
    error = root.find(f"{OAI}error")
    if error is not None:
        code = error.get("code", "")
        if code == "noRecordsMatch":
            return [], None
        if code == "badResumptionToken":
            raise BadToken(error.text or code)
        raise DataFormatError(where, None, f"OAI-PMH error {code}: {(error.text or '').strip()}")
    listing = root.find(f"{OAI}ListRecords")
    if listing is None:
        raise DataFormatError(where, None, "an OAI-PMH page without ListRecords")
    out: list[tuple[str, dict | None]] = []
    for record in listing.findall(f"{OAI}record"):
        header = record.find(f"{OAI}header")
        stamp = _text(header, f"{OAI}datestamp")
        if header is not None and header.get("status") == "deleted":
            out.append((stamp, None))
            continue
        meta = record.find(f"{OAI}metadata/{ARXIV}arXiv")
        pid = _text(meta, f"{ARXIV}id")
        if meta is None or not pid:
            raise DataFormatError(where, None, f"a record without arXiv metadata (datestamp {stamp})")
        authors = [
            " ".join(p for p in (_text(a, f"{ARXIV}forenames"), _text(a, f"{ARXIV}keyname")) if p)
            for a in meta.findall(f"{ARXIV}authors/{ARXIV}author")
        ]
        comment = _text(meta, f"{ARXIV}comments")
        out.append(
            (
                stamp,
                {
                    "id": pid,
                    "title": _text(meta, f"{ARXIV}title"),
                    "summary": _text(meta, f"{ARXIV}abstract"),
                    "authors": authors,
                    "categories": _text(meta, f"{ARXIV}categories").split(),
                    "comment": comment or None,
                    "abs": f"https://arxiv.org/abs/{pid}",
                    "pdf": f"https://arxiv.org/pdf/{pid}",
                },
            )
        )
    token_node = listing.find(f"{OAI}resumptionToken")
    token = (token_node.text or "").strip() if token_node is not None else ""
    return out, token or None


def _fetch(url: str, timeout_s: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        body = resp.read()
        length = resp.headers.get("Content-Length")
    if length is not None and len(body) != int(length):
        raise http.client.IncompleteRead(body, int(length) - len(body))
    return body


class Harvester:
    """One harvest into ``dest``; ``sleep`` and ``fetch`` are the clock and the transport (tests pass real
    ones with no delay)."""

    def __init__(
        self,
        request: Request,
        dest: Path,
        delay_s: float = 3.0,
        retries: int = 5,
        timeout_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[str], None] = lambda message: None,
    ):
        self.request, self.dest, self.delay_s, self.retries = request, Path(dest), delay_s, retries
        self.timeout_s, self.sleep, self.progress = timeout_s, sleep, progress
        self.work = self.dest / ".harvest"
        self.report = HarvestReport()

    def _url(self, params: dict[str, str]) -> str:
        return self.request.url + "?" + urllib.parse.urlencode(params)

    def _page(self, params: dict[str, str]) -> tuple[list, str | None]:
        """One page, retried on a 503 (after its Retry-After), a cut connection or a truncated body."""
        url = self._url(params)
        failures = 0
        while True:
            try:
                return parse_page(_fetch(url, self.timeout_s), url)
            except urllib.error.HTTPError as exc:
                if exc.code != 503:
                    raise DataPathError(f"harvest: {url} answered HTTP {exc.code}") from None
                wait = _retry_after(exc.headers.get("Retry-After"), self.delay_s)
                reason = f"503, Retry-After {wait:g} s"
            except (http.client.IncompleteRead, ConnectionError, urllib.error.URLError, TimeoutError) as exc:
                wait, reason = self.delay_s, f"{type(exc).__name__}: {exc}"
            except ET.ParseError as exc:
                wait, reason = self.delay_s, f"a page that is not whole XML ({exc})"
            failures += 1
            self.report.retries += 1
            if failures > self.retries:
                raise DataPathError(
                    f"harvest: {url} failed {failures} times in a row (last: {reason}); the pages kept so "
                    f"far are in {self.work}: run the same command again to continue"
                )
            self.progress(f"retrying in {wait:g} s ({reason})")
            self.sleep(wait)

    def _state(self) -> dict | None:
        try:
            state = json.loads((self.work / STATE).read_text())
        except (OSError, ValueError):
            return None
        return state if state.get("request") == self.request.key() else None

    def _start_over(self) -> dict:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        state = {"request": self.request.key(), "pages": 0, "next": None, "done": False}
        write_text_atomic(self.work / STATE, json.dumps(state))
        return state

    def pages(self) -> Iterator[Path]:
        """Every page file of a complete list, fetching what is missing."""
        state = self._state()
        if state is None:
            state = self._start_over()
        else:
            self.report.resumed_from_page = state["pages"]
        restarted = False
        while not state["done"]:
            params = (
                {"verb": "ListRecords", "resumptionToken": state["next"]}
                if state["next"]
                else self.request.first()
            )
            if state["pages"] or state["next"]:
                self.sleep(self.delay_s)
            try:
                records, token = self._page(params)
            except BadToken as exc:
                if restarted or not state["next"]:
                    raise DataPathError(f"harvest: the server refused a resumption token: {exc}") from None
                self.progress(f"the resumption token was refused ({exc}): starting the list again")
                restarted = True
                self.report.restarts += 1
                state = self._start_over()
                continue
            page = self.work / f"page-{state['pages']:06d}.json"
            write_text_atomic(page, json.dumps(records))
            state = {**state, "pages": state["pages"] + 1, "next": token, "done": token is None}
            write_text_atomic(
                self.work / STATE, json.dumps(state)
            )  # after the page: a kill re-asks, never skips
            self.progress(f"page {state['pages']}: {len(records)} records")
        yield from sorted(self.work.glob("page-*.json"))

    def run(self) -> HarvestReport:
        self.dest.mkdir(parents=True, exist_ok=True)
        days: dict[str, dict[str, dict]] = {}
        for page in self.pages():
            self.report.pages += 1
            for stamp, record in json.loads(page.read_text()):
                if record is None:
                    self.report.deleted += 1
                    continue
                if self.request.category and self.request.category not in record["categories"]:
                    self.report.outside_category += 1
                    continue
                days.setdefault(stamp, {})[record["id"]] = record  # a later page's record of an id wins
                self.report.records += 1
        for stamp, records in sorted(days.items()):
            _check_day(stamp)
            path = self.dest / f"{stamp}.jsonl"
            merged = {**_read_day(path), **records}
            write_text_atomic(
                path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in merged.values())
            )
            self.report.days[path.name] = len(records)
        shutil.rmtree(self.work, ignore_errors=True)
        return self.report


def _retry_after(value: str | None, default: float) -> float:
    """Seconds from a Retry-After header (seconds or an HTTP date); ``default`` when absent or unreadable."""
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - dt.datetime.now(dt.UTC)).total_seconds()
        except (TypeError, ValueError):
            return default
    if seconds > MAX_WAIT_S:
        raise DataPathError(f"harvest: the server asks to wait {seconds:.0f} s; try again later")
    return max(seconds, 0.0)


def _check_day(stamp: str) -> None:
    try:
        dt.date.fromisoformat(stamp)
    except ValueError:
        raise DataFormatError("OAI-PMH", None, f"a record's datestamp {stamp!r} is not a day") from None


def _read_day(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    out = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise DataFormatError(path, number, f"not JSON: {exc}") from None
            out[record["id"]] = record
    return out


def parse_day(text: str, name: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{name} {text!r} is not a date (YYYY-MM-DD)") from None
