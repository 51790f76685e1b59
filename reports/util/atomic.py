"""Writing files so that a reader never sees half of one, and write errors as one line.

    write_json(path, doc)          JSON to a temporary file in the same folder, then renamed
    with staged(out_dir) as tmp:   write a set of files into tmp (a hidden folder beside
                                   their destination); on success each is moved into out_dir
                                   with signals held, so an interrupt leaves the old set or
                                   the new one, never a mix; on failure tmp is removed
    with safe_write(path, what):   an OSError inside becomes FwbenchError: which path, what
                                   went wrong, what to do (the CLI prints it as one line)
    absolute(path)                 a path the user gave, against the working directory now

Files are created with the usual permissions (0666 less the umask), not mkstemp's 0600.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from reports.util import signals
from workloads.base import FwbenchError


def absolute(path: Path | str) -> Path:
    """A path the user gave, resolved against the working directory now (and ~ expanded), so
    that it names the same file in a process started elsewhere: fwbench run's benchmark
    processes run in the checkout, a Slurm job wherever the node starts it."""
    return Path(os.path.abspath(os.path.expanduser(str(path))))


ADVICE = {
    errno.ENOSPC: "the disk is full: free space or choose another folder",
    errno.EDQUOT: "the disk quota is used up: free space or choose another folder",
    errno.EROFS: "the file system is read-only: choose a writable folder",
    errno.EACCES: "permission denied: choose a folder you can write to",
    errno.EPERM: "operation not permitted: choose a folder you can write to",
    errno.EISDIR: "it is a folder: give a file name",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
    errno.EEXIST: "a file is in the way of a folder: choose another path or remove it",
    errno.ENAMETOOLONG: "the name is too long: choose a shorter path",
}


def describe(e: OSError, path: Path | str, what: str) -> str:
    """One line: which path, what went wrong, what to do."""
    where = e.filename if getattr(e, "filename", None) else path
    advice = ADVICE.get(e.errno or 0, "check the path and try again")
    return f"cannot write {what} {where}: {e.strerror or e} ({advice})"


@contextlib.contextmanager
def safe_write(path: Path | str, what: str) -> Iterator[None]:
    try:
        yield
    except OSError as e:
        raise FwbenchError(describe(e, path, what)) from None


def _mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write JSON to a temporary file in the same folder, then rename it over `path`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".staging-", dir=out_dir))
    try:
        yield tmp
        _move_into(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _move_into(tmp: Path, out_dir: Path) -> None:
    """Move every entry of tmp into out_dir (a folder replaces the folder of the same name),
    with SIGINT/SIGTERM/SIGHUP held until all are in place."""
    with signals.held():
        for entry in sorted(tmp.iterdir()):
            dest = out_dir / entry.name
            if entry.is_dir() and dest.is_dir() and not dest.is_symlink():
                trash = tmp / f".old-{entry.name}"
                os.replace(dest, trash)
            os.replace(entry, dest)
