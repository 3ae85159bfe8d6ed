"""``tfseqrec data download`` against archives served from 127.0.0.1 (no test reaches the internet)."""

import functools
import hashlib
import http.server
import io
import os
import threading
import zipfile

import pytest

from tfseqrec import cli
from tfseqrec.data import download

DATA = b"1\t10\t5\t881250949\n2\t20\t3\t891717742\n" * 1000


def _blob(content):
    """An independent git blob SHA-1: sha1(b"blob <len>\\0" + content)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; honours ``Range`` unless ``ranges`` is off."""

    ranges = True
    requests = []

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        type(self).requests.append((self.path, self.headers.get("Range")))
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404)
            return
        body = open(path, "rb").read()
        start = 0
        if self.ranges and self.headers.get("Range"):
            start = int(self.headers["Range"].split("=")[1].rstrip("-"))
            self.send_response(206)
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("tiny/u.data", DATA)
        zf.writestr("tiny/README", b"a readme")
    (root / "tiny.zip").write_bytes(archive.getvalue())
    (root / "extra.txt").write_bytes(b"1 2\n1 3\n")
    _Handler.requests = []
    _Handler.ranges = True
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(root))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    httpd.shutdown()


def _sources(url, data_sum=None):
    return [
        download.Source(
            f"{url}/tiny.zip",
            members={"tiny/u.data": "u.data", "tiny/README": "README"},
            checksums={"u.data": data_sum or _blob(DATA)},
        ),
        download.Source(f"{url}/extra.txt", checksums={"extra.txt": _blob(b"1 2\n1 3\n")}),
    ]


def test_download_extracts_and_verifies(server, tmp_path):
    url, _ = server
    folder = download.download("tiny", tmp_path / "cache", _sources(url), progress=False)
    assert sorted(os.listdir(folder)) == ["README", "extra.txt", "u.data"]  # no archive or .part left
    assert open(os.path.join(folder, "u.data"), "rb").read() == DATA
    requests = len(_Handler.requests)
    download.download("tiny", tmp_path / "cache", _sources(url), progress=False)
    assert len(_Handler.requests) == requests  # verified files are not fetched again


def test_an_interrupted_download_resumes(server, tmp_path):
    url, root = server
    folder = tmp_path / "cache" / "tiny"
    folder.mkdir(parents=True)
    half = (root / "tiny.zip").read_bytes()[:500]
    (folder / "tiny.zip.download.part").write_bytes(half)
    download.download("tiny", tmp_path / "cache", _sources(url), progress=False)
    assert ("/tiny.zip", "bytes=500-") in _Handler.requests
    assert open(folder / "u.data", "rb").read() == DATA


def test_a_server_without_ranges_restarts_cleanly(server, tmp_path, capsys):
    url, root = server
    _Handler.ranges = False
    folder = tmp_path / "cache" / "tiny"
    folder.mkdir(parents=True)
    (folder / "tiny.zip.download.part").write_bytes((root / "tiny.zip").read_bytes()[:500])
    download.download("tiny", tmp_path / "cache", _sources(url), progress=False)
    assert "ignored the resume request" in capsys.readouterr().err
    assert open(folder / "u.data", "rb").read() == DATA


def test_a_checksum_mismatch_deletes_the_file(server, tmp_path):
    url, _ = server
    with pytest.raises(download.DownloadError, match="checksum is not the published one"):
        download.download("tiny", tmp_path / "cache", _sources(url, data_sum="0" * 40), progress=False)
    assert os.listdir(tmp_path / "cache" / "tiny") == []


def test_offline_says_what_to_do(tmp_path, capsys):
    # A port nothing listens on: connection refused, as offline.
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    code = cli.main(
        ["data", "download", "ml-100k", "--dir", str(tmp_path), "--base-url", f"http://127.0.0.1:{port}"]
    )
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "could not reach http://127.0.0.1" in err and "point TFSEQREC_DATA at a folder" in err


def test_a_mirror_with_other_files_is_refused(server, tmp_path, capsys):
    url, root = server
    # A mirror of ml-100k holding a tiny archive: the published checksum of u.data fails.
    (root / "ml-100k.zip").write_bytes((root / "tiny.zip").read_bytes())
    assert cli.main(["data", "download", "ml-100k", "--dir", str(tmp_path), "--base-url", url]) == 1
    assert "lacks" in capsys.readouterr().err  # the archive has no ml-100k/ members


def test_git_blob_sha1_matches_git(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    assert download.git_blob_sha1(path) == "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object
