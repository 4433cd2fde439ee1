"""``scix data fetch`` of a multi-file source against a loopback HTTP server serving the real CiteULike-a
files: the pinned checksums are those of the shared copy, a fetched folder loads as the shared one does, and a
corrupted, truncated or missing file leaves nothing behind and names the file."""

import http.server
import shutil
import threading
from functools import partial

import pytest

from scix_core.cli.main import main
from scix_core.data.citeulike import load_citeulike
from scix_core.data.fetch import sources

pytestmark = pytest.mark.realdata
FILES = [f.name for f in sources()["citeulike-a"].files]


class _Truncating(http.server.SimpleHTTPRequestHandler):
    """Serves ``truncate`` (a file name) with its full Content-Length but only half its body."""

    truncate = ""

    def copyfile(self, source, outputfile):
        if self.path.endswith("/" + self.truncate):
            body = source.read()
            outputfile.write(body[: len(body) // 2])
            return
        super().copyfile(source, outputfile)


@pytest.fixture
def mirror(tmp_path, data_dir):
    """(url_base, served folder, handler class): a loopback mirror holding copies of the five files."""
    served = tmp_path / "served"
    served.mkdir()
    for name in FILES:
        shutil.copy(data_dir / "citeulike-a" / name, served / name)
    handler = type("Handler", (_Truncating,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", served, handler
    server.shutdown()


def _left_behind(dest):
    return sorted(p.name for p in dest.iterdir()) if dest.exists() else []


def test_fetch_from_a_mirror_gives_the_shared_copy(home, tmp_path, data_dir, mirror, capsys):
    url_base, _, _ = mirror
    dest = tmp_path / "data"
    assert main(["data", "fetch", "citeulike-a", "--url-base", url_base, "--dest", str(dest)]) == 0
    for name in FILES:
        assert (dest / "citeulike-a" / name).read_bytes() == (data_dir / "citeulike-a" / name).read_bytes()
    fetched, shared = load_citeulike(dest / "citeulike-a"), load_citeulike(data_dir / "citeulike-a")
    assert len(fetched.papers) == len(shared.papers) == 16_980
    assert fetched.papers[:50] == shared.papers[:50] and fetched.interactions == shared.interactions
    assert _left_behind(dest) == ["citeulike-a"]
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in FILES) and "citeulike" in out and "scifact" in out


def test_a_corrupted_file_leaves_nothing_and_is_named(home, tmp_path, mirror, capsys):
    url_base, served, _ = mirror
    raw = bytearray((served / "citations.dat").read_bytes())
    raw[1000] ^= 0x01  # one bit: same length, wrong checksum
    (served / "citations.dat").write_bytes(bytes(raw))
    dest = tmp_path / "data"
    assert main(["data", "fetch", "citeulike-a", "--url-base", url_base, "--dest", str(dest)]) == 2
    err = capsys.readouterr().err
    assert "citeulike-a/citations.dat" in err and "sha256" in err
    assert _left_behind(dest) == []


def test_a_404_on_the_second_file_leaves_nothing_and_is_named(home, tmp_path, mirror, capsys):
    url_base, served, _ = mirror
    (served / FILES[1]).unlink()
    dest = tmp_path / "data"
    assert main(["data", "fetch", "citeulike-a", "--url-base", url_base, "--dest", str(dest)]) == 2
    err = capsys.readouterr().err
    assert f"citeulike-a/{FILES[1]}" in err and "404" in err
    assert _left_behind(dest) == []


def test_a_truncated_download_leaves_nothing_and_is_named(home, tmp_path, mirror, capsys):
    url_base, _, handler = mirror
    handler.truncate = "tags.dat"
    dest = tmp_path / "data"
    assert main(["data", "fetch", "citeulike-a", "--url-base", url_base, "--dest", str(dest)]) == 2
    err = capsys.readouterr().err
    assert "citeulike-a/tags.dat" in err and "truncated" in err
    assert _left_behind(dest) == []


def test_a_multi_file_source_takes_no_single_url(home, tmp_path, capsys):
    assert (
        main(["data", "fetch", "citeulike-a", "--url", "http://127.0.0.1:1/x.zip", "--sha256", "0" * 64]) == 2
    )
    assert "--url-base" in capsys.readouterr().err
