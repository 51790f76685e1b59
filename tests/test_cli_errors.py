"""`fwbench compare` as a CI gate (exit codes), write errors as one line, and reports that
are replaced whole or not at all."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import pytest

from reports.commands import cli
from reports.rendering import document
from reports.util import atomic
from tests.support.reports_fixtures import plausible_processes, write


def _main(argv, capsys):
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out


@pytest.fixture
def runs(tmp_path):
    old = plausible_processes(tmp_path / "old", "torch", seed=0)
    new = plausible_processes(tmp_path / "new", "torch", seed=0, slow=2.0)
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = write(tmp_path / "broken.json", "{")
    return old, new, empty, broken


@pytest.mark.parametrize("side", ["missing", "empty", "unreadable"])
@pytest.mark.parametrize("which", ["OLD", "NEW"])
def test_compare_exits_3_when_a_side_has_no_records(runs, side, which, tmp_path, capsys):
    old, _, empty, broken = runs
    bad = {"missing": tmp_path / "nope", "empty": empty, "unreadable": broken}[side]
    argv = ["compare", bad, old] if which == "OLD" else ["compare", old, bad]
    rc, out = _main(argv, capsys)
    assert rc == cli.EXIT_NO_RECORDS == 3
    assert len(out.err.strip().splitlines()) == 1 and f"no readable fwbench record in {which}" in out.err


def test_compare_fail_on_slower_gates(runs, capsys):
    old, new, _, _ = runs
    assert _main(["compare", old, old, "--fail-on-slower"], capsys)[0] == 0
    assert _main(["compare", old, new], capsys)[0] == 0
    rc, out = _main(["compare", old, new, "--fail-on-slower"], capsys)
    assert rc == cli.EXIT_SLOWER == 4 and "6 cases slower" in out.err
    assert _main(["compare", new, old, "--fail-on-slower"], capsys)[0] == 0      # faster passes


def test_compare_help_documents_exit_codes(capsys):
    rc, out = _main(["compare", "--help"], capsys)
    assert rc == 0 and "%%" not in out.out and "Holm level" in out.out
    text = " ".join(out.out.split())
    assert "3 OLD or NEW has no readable record" in text and "4 with --fail-on-" in text


# ----------------------------------------------------------------------------- write errors

@pytest.mark.parametrize("case", ["out_is_a_file", "csv_is_a_folder", "read_only", "disk_full"])
def test_write_errors_are_one_line(case, runs, tmp_path, capsys, monkeypatch):
    old, new, _, _ = runs
    afile = write(tmp_path / "afile", "x")
    if case == "out_is_a_file":
        argv, phrase = ["report", old, "-o", afile / "sub"], "Not a directory"
    elif case == "csv_is_a_folder":
        argv, phrase = ["compare", old, new, "--csv", tmp_path], "it is a folder: give a file name"
    elif case == "read_only":
        def refuse(*a, **k):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / "ro"))
        monkeypatch.setattr(atomic.tempfile, "mkdtemp", refuse)
        argv, phrase = ["report", old, "-o", tmp_path / "ro"], "read-only: choose a writable folder"
    else:
        real = document.write_csv

        def full(df, path):
            real(df, path)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        monkeypatch.setattr(document, "write_csv", full)
        argv, phrase = ["report", old, "-o", tmp_path / "out"], "the disk is full"
    rc, out = _main(argv, capsys)
    assert rc == 2 and phrase in out.err and len(out.err.strip().splitlines()) == 1
    assert out.err.startswith(f"fwbench {argv[0]}: error: cannot write")
    if case == "disk_full":            # nothing half-written left behind
        assert not (tmp_path / "out" / "report.md").exists()
        assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".staging")]


def test_a_failed_render_leaves_the_old_report_whole(runs, tmp_path, monkeypatch, capsys):
    old, new, _, _ = runs
    out = tmp_path / "out"
    assert _main(["report", old, "-o", out], capsys)[0] == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def interrupted(df, path):
        raise KeyboardInterrupt
    monkeypatch.setattr(document, "write_csv", interrupted)
    assert _main(["report", new, "-o", out], capsys)[0] == 130
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before


def test_sigterm_during_render_leaves_the_old_report_whole(runs, tmp_path):
    """A real `fwbench report` process killed while it renders: the old report stays."""
    old, new, _, _ = runs
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "reports", "report", str(old), "-o", str(out)], check=True,
                   capture_output=True, timeout=300)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    proc = subprocess.Popen([sys.executable, "-m", "reports", "report", str(new), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(600):                         # wait until it is writing into its staging folder
        if any(p.name.startswith(".staging") and any(p.rglob("*.png")) for p in out.iterdir()):
            break
        if proc.poll() is not None:
            break
        import time
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()
             and not p.relative_to(out).parts[0].startswith(".staging")}
    assert after == before or proc.returncode == 0


def test_json_files_are_world_readable(tmp_path):
    atomic.write_json(tmp_path / "x.json", {"a": 1})
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o666 & ~umask
