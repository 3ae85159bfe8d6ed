"""Fetching the public benchmark datasets: ``tfseqrec data download {ml-1m,ml-100k}``.

MovieLens may not be redistributed, so tfseqrec ships no data: this module fetches
it from its publishers into a cache directory laid out as ``$TFSEQREC_DATA`` expects
(``DIR/ml-1m/ml-1m.txt``, ``DIR/ml-100k/u.data``, ...):

- ``ml-100k``: the GroupLens archive ``ml-100k.zip``.
- ``ml-1m``: the GroupLens archive ``ml-1m.zip`` (``ratings.dat`` with timestamps,
  ``movies.dat``, ``users.dat``) and the SASRec ``ml-1m.txt`` (kang205/SASRec), the
  5-core, time-ordered version that the published full-ranking results use.

Every data file is checked against the git blob SHA-1 of the published file (the hash
``git hash-object`` prints; the same blobs are in many public repositories, which is
how they were recorded here). Downloads go to ``NAME.part`` beside their target and
resume with an HTTP range request after an interruption; a server that ignores the
range restarts the file from scratch, and a file that fails its checksum is deleted.
Nothing half-written ever takes a data file's name.
"""

import dataclasses
import hashlib
import os
import shutil
import sys
import urllib.error
import urllib.request
import zipfile

GROUPLENS = "https://files.grouplens.org/datasets/movielens"
SASREC = "https://raw.githubusercontent.com/kang205/SASRec/master/data"
CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Source:
    """One download: a file, or a zip archive whose ``members`` are extracted.

    Attributes:
        url: where to fetch it.
        members: for an archive, ``{path in the archive: file name in the dataset folder}``;
            ``None`` for a plain file.
        checksums: ``{file name in the dataset folder: git blob SHA-1}``; files not
            listed (READMEs) are kept without a check.
    """

    url: str
    members: dict = None
    checksums: dict = dataclasses.field(default_factory=dict)

    @property
    def filename(self):
        return self.url.rstrip("/").rsplit("/", 1)[-1]


DATASETS = {
    "ml-100k": [
        Source(
            f"{GROUPLENS}/ml-100k.zip",
            members={
                f"ml-100k/{name}": name
                for name in ("u.data", "u.item", "u.genre", "u.user", "u.info", "u.occupation", "README")
            },
            checksums={
                "u.data": "16ef21ed827cae1a3f71e89e23cffb5a8f44baae",
                "u.item": "91bb56d53fcb5f8bbac079755593b48d34cfc9a7",
            },
        )
    ],
    "ml-1m": [
        Source(
            f"{GROUPLENS}/ml-1m.zip",
            members={f"ml-1m/{name}": name for name in ("ratings.dat", "movies.dat", "users.dat", "README")},
            checksums={
                "ratings.dat": "77a7c4b150f588c23bb9e1f068aa996c0b413695",
                "movies.dat": "9a735435722829dad68446ef1c30d001d5d00c1d",
                "users.dat": "2f86be06c70946984c0d5d56f9fcaa658eef139e",
            },
        ),
        Source(f"{SASREC}/ml-1m.txt", checksums={"ml-1m.txt": "9ab8e3edb8742f8d8cc4911e3dee25e82a6fcc24"}),
    ],
}


class DownloadError(OSError):
    """A dataset could not be fetched; the message says what to do."""


def default_directory():
    """``$TFSEQREC_CACHE``, else ``~/.cache/tfseqrec/data``."""
    return os.environ.get("TFSEQREC_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "tfseqrec", "data"
    )


def git_blob_sha1(path):
    """The SHA-1 ``git hash-object`` gives ``path``: of ``b"blob <size>\\0" + content``."""
    digest = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def download(name, directory=None, sources=None, progress=None, timeout=60):
    """Fetches dataset ``name`` into ``directory/name/``; returns that folder.

    Files already present with the right checksum are kept (a second call downloads
    nothing).

    Args:
        name: a key of ``DATASETS``.
        directory: the data root (default ``default_directory()``); point
            ``$TFSEQREC_DATA`` at it afterwards.
        sources: the ``Source`` list to fetch instead of ``DATASETS[name]`` (a mirror).
        progress: show a progress bar; ``None`` shows one on a terminal.
        timeout: seconds to wait for the server.

    Raises:
        DownloadError: offline, a server error, or a checksum mismatch (the bad file
            is deleted).
    """
    if sources is None:
        if name not in DATASETS:
            raise ValueError(f"unknown dataset {name!r}; expected one of {sorted(DATASETS)}")
        sources = DATASETS[name]
    folder = os.path.join(directory or default_directory(), name)
    os.makedirs(folder, exist_ok=True)
    for source in sources:
        targets = list(source.members.values()) if source.members else [source.filename]
        if all(_verified(os.path.join(folder, t), source.checksums.get(t)) for t in targets):
            continue
        fetched = os.path.join(folder, source.filename + (".download" if source.members else ""))
        _fetch(source.url, fetched, folder, progress, timeout)
        if source.members:
            try:
                _extract(fetched, source, folder)
            finally:
                os.remove(fetched)
        else:
            _check(fetched, source.checksums.get(source.filename), source.url)
    return folder


def _verified(path, checksum):
    return os.path.exists(path) and (checksum is None or git_blob_sha1(path) == checksum)


def _check(path, checksum, url):
    if checksum is not None and git_blob_sha1(path) != checksum:
        os.remove(path)
        raise DownloadError(
            f"{url}: the file's checksum is not the published one (git blob {checksum}); "
            f"it was deleted. Try again; if it fails again, the server's copy differs"
        )


def _fetch(url, path, folder, progress, timeout):
    """Downloads ``url`` to ``path`` through ``path + ".part"``, resuming a previous part."""
    part = path + ".part"
    done = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={"User-Agent": "tfseqrec"})
    if done:
        request.add_header("Range", f"bytes={done}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and done:  # the range starts past the end: the part is stale
            os.remove(part)
            return _fetch(url, path, folder, progress, timeout)
        raise DownloadError(f"{url}: the server answered {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(
            f"could not reach {url} ({reason}). If this machine is offline, fetch that file elsewhere and "
            f"put it in {folder}/ (see docs/data.md), or point TFSEQREC_DATA at a folder "
            "that holds the dataset"
        ) from None
    with response:
        resumed = done and response.status == 206
        if done and not resumed:
            print(
                f"tfseqrec: {url}: the server ignored the resume request; downloading it again",
                file=sys.stderr,
            )
            done = 0
        length = response.headers.get("Content-Length")
        total = done + int(length) if length is not None else None
        bar = _bar(total, os.path.basename(path), progress, done)
        with open(part, "ab" if resumed else "wb") as f:
            for block in iter(lambda: response.read(CHUNK), b""):
                f.write(block)
                if bar is not None:
                    bar.update(len(block))
        if bar is not None:
            bar.close()
    if total is not None and os.path.getsize(part) != total:
        raise DownloadError(
            f"{url}: the connection ended after {os.path.getsize(part)} of {total} bytes; "
            "run the command again to resume"
        )
    os.replace(part, path)


def _extract(archive, source, folder):
    try:
        with zipfile.ZipFile(archive) as zf:
            names = set(zf.namelist())
            missing = sorted(set(source.members) - names)
            if missing:
                raise DownloadError(f"{source.url}: the archive lacks {missing}")
            for member, target in source.members.items():
                final = os.path.join(folder, target)
                with zf.open(member) as src, open(final + ".part", "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
                _check(final + ".part", source.checksums.get(target), f"{source.url} ({member})")
                os.replace(final + ".part", final)
    except zipfile.BadZipFile:
        raise DownloadError(f"{source.url}: not a valid zip archive; it was deleted, try again") from None


def _bar(total, label, progress, initial):
    if progress is False or (progress is None and not sys.stderr.isatty()):
        return None
    try:
        import tqdm  # optional: without it, no bar
    except ImportError:
        return None
    return tqdm.tqdm(total=total, initial=initial, unit="B", unit_scale=True, desc=label)
