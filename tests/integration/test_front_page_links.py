"""`study front-page --reproduction-page`: the page its reproduction link shows must exist; a
missing one is a one-line error naming it, and once it is built the same command writes the text
with the link that shows that page."""

from pathlib import Path

from test_front_page import CATEGORIES, FIGURES, REPRODUCTION, table

from study.cli import main


def test_a_missing_reproduction_page_is_one_line_and_the_rerun_links_it(tmp_path, capsys):
    table().to_csv(tmp_path / "classwise.csv", index=False)
    (tmp_path / "reproduction.md").write_text(REPRODUCTION)
    page, out = tmp_path / "reproduction.html", tmp_path / "front.rst"
    args = ["front-page", "--classwise", str(tmp_path / "classwise.csv"), "--reproduction",
            str(tmp_path / "reproduction.md"), "--reproduction-page", str(page), "--preset", "demo",
            "--out", str(out), "--figures", *FIGURES, "--categories", *CATEGORIES]
    assert main(args) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(page) in err and "Traceback" not in err
    assert not out.exists()
    page.write_text("<table></table>")
    assert main(args) == 0
    assert f"resultPath:'{page}',content:'html'" in Path(out).read_text()
