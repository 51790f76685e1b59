"""Result files fwbench did not write: badly typed, impossible or crafted values. Each bad
record or file is one problem line naming the file, the record and the field; the good
files of the same folder still render; nothing a file holds reaches a report unescaped."""
from __future__ import annotations

import csv
import os
import re

import pytest

import reports
from reports.commands import cli
from reports.measures import validate
from reports.util import escape
from tests.support.reports_fixtures import BAD_FILES, INJECT, bad_file, injected_run, plausible_run, write
from workloads.record import FIELDS


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_each_bad_file_is_one_line_naming_file_record_and_field(kind, tmp_path):
    path = write(tmp_path / f"{kind}.json", bad_file(kind))
    df = reports.load(path)
    probs = df.attrs["problems"]
    field = BAD_FILES[kind][1]
    assert len(probs) == 1, probs
    assert probs[0].startswith(str(path)) and field in probs[0]
    assert "\n" not in probs[0]
    if "machine_info" in probs[0]:                  # a bad machine field is dropped, the records kept
        assert len(df) == 2 and "ignored" in probs[0]
    elif "fwbench.records" not in probs[0]:
        assert "skipped" in probs[0] and ("benchmark 'test_gpt[torch-eager-forward]'" in probs[0]
                                          or "benchmarks[0]" in probs[0])
        assert list(df["mode"]) == ["compiled"]      # the other record of the file is kept


def test_impossible_values_never_reach_the_findings(tmp_path):
    for kind in ("zero_time", "negative_time", "nan_time", "unknown_mode", "zero_gemm"):
        df = reports.load(write(tmp_path / f"{kind}.json", bad_file(kind)))
        assert (df["median_s"] > 0).all() and set(df["mode"]) <= {"eager", "compiled"}
        assert df["utilisation"].isna().all() if kind == "zero_gemm" else True


def test_a_folder_of_hostile_files_renders_the_good_ones(tmp_path, capsys):
    folder = tmp_path / "in"
    for kind in BAD_FILES:
        write(folder / f"{kind}.json", bad_file(kind))
    write(folder / "good.json", plausible_run("jax"))
    write(folder / "deep.json", "[" * 100_000 + "]" * 100_000)
    write(folder / "binary.json", "")
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    os.symlink("loop.json", folder / "loop.json")
    rc = cli.main(["report", str(folder), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err
    assert "deep.json: " in err and "loop.json: symbolic link that cannot be followed" in err
    assert "binary.json: not a text file" in err
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| forward | jax | compiled | ok |" in md


def test_report_fails_only_when_nothing_is_readable(tmp_path, capsys):
    write(tmp_path / "in" / "a.json", bad_file("records_dict") | {"benchmarks": "no"})
    assert cli.main(["report", str(tmp_path / "in"), "-o", str(tmp_path / "out")]) == 2
    assert "nothing to report" in capsys.readouterr().err


def test_every_numeric_record_field_has_a_range_check():
    """A numeric field added to workloads.record is range-checked (RANGES, else finite)."""
    for k, (types, _, _) in FIELDS.items():
        if int in types or float in types:
            assert validate.number_problem(k, float("nan")) is not None
            assert validate.number_problem(k, 10 ** 400) is not None


# ----------------------------------------------------------------------------- injection

@pytest.fixture(scope="module")
def injected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inject")
    write(tmp / "in" / "torch.json", injected_run())
    rc = cli.main(["report", str(tmp / "in"), "-o", str(tmp / "out")])
    assert rc == 0
    return tmp / "out"


def test_latex_has_no_command_from_a_result_file(injected):
    tex = (injected / "tables.tex").read_text()
    assert "\\input{/etc" not in tex and "\\iffalse" not in tex
    for label in re.findall(r"\\label\{([^}]*)\}", tex):
        assert re.fullmatch(r"tab:fwbench-[A-Za-z0-9-]+", label), label
    assert "\\textbackslash{}input\\{/etc/passwd\\}" in tex


def test_markdown_has_no_html_link_or_injected_block(injected):
    md = (injected / "report.md").read_text()
    assert "<script" not in md and "<iframe" not in md and "<b>" not in md
    assert "[link](" not in md and "[link\\](" in md
    assert "\n# injected heading" not in md and "\n- item" not in md
    assert "&lt;script&gt;" in md


def test_html_has_no_tag_from_a_result_file(injected):
    page = (injected / "report.html").read_text()
    assert "<script" not in page and "<iframe" not in page and "<b>cpu" not in page
    # the text itself, escaped (table cells carry fwbench's own <wbr> break points: issue 28)
    assert "&lt;iframe src=javascript:alert(1)&gt;" in page.replace("<wbr>", "")
    assert set(re.findall(r"<(\w+)", page)) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3",
                                                 "p", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td",
                                                 "caption", "figure", "figcaption", "img", "a", "em", "strong", "code",
                                                 "wbr", "div", "span", "br", "nav", "section", "sup"}


def test_csv_cells_cannot_be_formulas(injected):
    with open(injected / "data.csv", newline="") as f:
        rows = list(csv.reader(f))
    cells = [c for r in rows for c in r]
    assert not any(c.startswith(escape.FORMULA_START) for c in cells)
    assert "'" + INJECT["reason"] in cells


def test_dollar_in_names_draws_figures(injected):
    assert (injected / "figures" / "throughput.png").exists() and (injected / "figures" / "speedup.png").exists()


def test_escapers():
    assert escape.markdown("# a\n<b>|[x](y) [1, 2]") == "\\# a &lt;b&gt;\\|[x\\](y) [1, 2]"
    assert escape.latex_label("gpt") == "gpt" and escape.latex_label("a}b") != escape.latex_label("a{b")
    assert escape.csv_cell("=1+1") == "'=1+1" and escape.csv_cell(-1.0) == -1.0
    assert escape.mpl("$x") == "\\$x" and escape.terminal("a\x1b[31mb\nc") == "a [31mb\nc"
