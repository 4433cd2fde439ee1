"""``scix data harvest arxiv`` against a loopback OAI-PMH server whose pages are built from real records of
the shared cs/AI listings (their listing day as the datestamp): a 503 with Retry-After, a connection cut
mid-page, an expired resumption token, a harvest killed and resumed; the day files load as the source
records do."""

import gzip
import http.server
import json
import threading
import urllib.parse
import xml.etree.ElementTree as ET

import pytest

from scix_core.cli.main import main
from scix_core.data.arxiv import load_arxiv_jsonl
from scix_core.data.harvest import Harvester, Request, parse_day
from scix_core.errors import DataPathError

pytestmark = pytest.mark.realdata
OAI, ARXIV = "http://www.openarchives.org/OAI/2.0/", "http://arxiv.org/OAI/arXiv/"
PER_DAY, PER_PAGE = 12, 5


@pytest.fixture(scope="module")
def listings(data_dir) -> list[tuple[str, dict]]:
    """(listing day, record) of the first PER_DAY records of each of the first two days of cs/AI."""
    folder = data_dir / "arxiv-daily"
    with gzip.open(folder / "cs_ai_daily.index.tsv.gz", "rt") as fh:
        days = [line.rstrip("\n").split("\t")[2].removesuffix(".jsonl") for line in list(fh)[1:2000]]
    with gzip.open(folder / "cs_ai_daily.jsonl.gz", "rt") as fh:
        records = [json.loads(next(fh)) for _ in days]
    first, second = sorted(set(days))[:2]
    return [(d, r) for d, r in zip(days, records) if d == first][:PER_DAY] + [
        (d, r) for d, r in zip(days, records) if d == second
    ][:PER_DAY]


def _page(records, token: str | None, deleted: str | None = None) -> bytes:
    """One ListRecords page in OAI-PMH's XML with the arXiv metadata format."""
    ET.register_namespace("", OAI)
    root = ET.Element(f"{{{OAI}}}OAI-PMH")
    listing = ET.SubElement(root, f"{{{OAI}}}ListRecords")
    if deleted:
        header = ET.SubElement(
            ET.SubElement(listing, f"{{{OAI}}}record"), f"{{{OAI}}}header", status="deleted"
        )
        ET.SubElement(header, f"{{{OAI}}}datestamp").text = deleted
    for day, rec in records:
        record = ET.SubElement(listing, f"{{{OAI}}}record")
        header = ET.SubElement(record, f"{{{OAI}}}header")
        ET.SubElement(header, f"{{{OAI}}}identifier").text = f"oai:arXiv.org:{rec['id']}"
        ET.SubElement(header, f"{{{OAI}}}datestamp").text = day
        meta = ET.SubElement(ET.SubElement(record, f"{{{OAI}}}metadata"), f"{{{ARXIV}}}arXiv")
        ET.SubElement(meta, f"{{{ARXIV}}}id").text = rec["id"]
        authors = ET.SubElement(meta, f"{{{ARXIV}}}authors")
        for name in rec["authors"]:
            author = ET.SubElement(authors, f"{{{ARXIV}}}author")
            *fore, key = name.split(" ")
            ET.SubElement(author, f"{{{ARXIV}}}keyname").text = key
            if fore:
                ET.SubElement(author, f"{{{ARXIV}}}forenames").text = " ".join(fore)
        ET.SubElement(meta, f"{{{ARXIV}}}title").text = rec["title"]
        ET.SubElement(meta, f"{{{ARXIV}}}categories").text = " ".join(rec["categories"])
        if rec.get("comment"):
            ET.SubElement(meta, f"{{{ARXIV}}}comments").text = rec["comment"]
        ET.SubElement(meta, f"{{{ARXIV}}}abstract").text = rec["summary"]
    if token:
        ET.SubElement(listing, f"{{{OAI}}}resumptionToken").text = token
    return ET.tostring(root, xml_declaration=True, encoding="utf-8")


class _OAI(http.server.BaseHTTPRequestHandler):
    """Serves ``pages`` (token ``tK`` -> page K); ``faults`` maps a token ("" for the first request) to the
    faults its next requests meet, in order: ``503``, ``cut``, ``expired``."""

    pages: list[bytes] = []
    faults: dict[str, list[str]] = {}
    asked: list[str] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        token = query.get("resumptionToken", "")
        self.asked.append(token)
        fault = self.faults.get(token, []).pop(0) if self.faults.get(token) else None
        if fault == "503":
            self.send_response(503)
            self.send_header("Retry-After", "7")
            self.end_headers()
            return
        if fault == "expired":
            body = (
                f'<OAI-PMH xmlns="{OAI}"><error code="badResumptionToken">expired</error></OAI-PMH>'.encode()
            )
        else:
            body = self.pages[int(token[1:]) if token else 0]
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if fault == "cut" else body)


@pytest.fixture
def server(listings):
    chunks = [listings[i : i + PER_PAGE] for i in range(0, len(listings), PER_PAGE)]
    handler = type("Handler", (_OAI,), {"faults": {}, "asked": []})
    handler.pages = [
        _page(chunk, f"t{k + 1}" if k + 1 < len(chunks) else None, deleted=listings[0][0] if k == 1 else None)
        for k, chunk in enumerate(chunks)
    ]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/oai", handler
    httpd.shutdown()


def _request(url, listings) -> Request:
    return Request("cs", parse_day(listings[0][0], "--from"), url=url)


def _source_papers(listings, tmp_path):
    """The source records loaded by the same loader, one file per day as the bots wrote them."""
    folder = tmp_path / "source"
    folder.mkdir()
    for day in {d for d, _ in listings}:
        (folder / f"{day}.jsonl").write_text("".join(json.dumps(r) + "\n" for d, r in listings if d == day))
    return load_arxiv_jsonl(folder).papers


def test_a_harvest_through_faults_writes_the_listings_day_by_day(listings, server, tmp_path):
    url, handler = server
    handler.faults = {"t1": ["503"], "t2": ["cut"], "t3": ["expired"]}
    waits: list[float] = []
    dest = tmp_path / "days"
    report = Harvester(_request(url, listings), dest, delay_s=0.5, sleep=waits.append).run()
    days = sorted({d for d, _ in listings})
    assert sorted(p.name for p in dest.iterdir()) == [f"{d}.jsonl" for d in days]  # the work folder is gone
    for day in days:
        written = [json.loads(line)["id"] for line in (dest / f"{day}.jsonl").read_text().splitlines()]
        assert written == [r["id"] for d, r in listings if d == day]
    assert load_arxiv_jsonl(dest).papers == _source_papers(listings, tmp_path)
    assert report.records == 2 * PER_DAY and report.deleted == 1 and report.restarts == 1
    assert 7.0 in waits and waits.count(0.5) >= 5  # the Retry-After, then the politeness delay between pages
    # the list: first page, t1 (503, again), t2 (cut, again), t3 refused, the whole list again, to the end
    assert handler.asked == ["", "t1", "t1", "t2", "t2", "t3", "", "t1", "t2", "t3", "t4"]


def test_an_interrupted_harvest_continues_from_the_last_page_kept(listings, server, tmp_path):
    url, handler = server
    handler.faults = {"t3": ["cut", "cut"]}
    dest = tmp_path / "days"
    with pytest.raises(DataPathError, match="run the same command again"):
        Harvester(_request(url, listings), dest, delay_s=0, retries=1, sleep=lambda s: None).run()
    assert not list(dest.glob("*.jsonl")) and (dest / ".harvest" / "state.json").exists()
    again = Harvester(_request(url, listings), dest, delay_s=0, sleep=lambda s: None).run()
    assert again.resumed_from_page == 3 and handler.asked.count("") == 1  # nothing fetched twice but t3
    assert load_arxiv_jsonl(dest).papers == _source_papers(listings, tmp_path)


def test_the_command_writes_day_files_the_ingest_reads(listings, server, tmp_path, home, capsys):
    url, _ = server
    dest = tmp_path / "days"
    argv = ["data", "harvest", "arxiv", "--set", "cs", "--from", listings[0][0], "--dest", str(dest)]
    assert main([*argv, "--url", url, "--delay", "0", "--category", "cs.CV"]) == 0
    out = capsys.readouterr().out
    cv = [r for _, r in listings if "cs.CV" in r["categories"]]
    assert f"harvested {len(cv)} records" in out and f"{2 * PER_DAY - len(cv)} outside cs.CV" in out
    assert main(["ingest", "--path", str(dest), "--format", "arxiv-jsonl", "--index", "h", "--no-embed"]) == 0
    assert main(["data", "harvest", "arxiv", "--set", "cs", "--from", "yesterday", "--dest", str(dest)]) == 2
    assert "is not a date" in capsys.readouterr().err
