"""The docs: the generated rule graph is the workflow's current one (regenerate: make docs), they name no commit,
and their lines, generated blocks included, fit 119 characters."""

import importlib.util
import re
import subprocess

import pandas as pd
import pytest

from oversmooth.core.markdown import list_item, unbroken, wrap
from oversmooth.reporting.findings import findings_page


@pytest.fixture
def update_docs(repo):
    spec = importlib.util.spec_from_file_location("update_docs", repo / "docs" / "update_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.workflow
def test_documented_rulegraph_is_current(repo, update_docs):
    readme = (repo / "docs" / "dag.md").read_text()
    shown = readme[readme.index(update_docs.RULEGRAPH_BEGIN):readme.index(update_docs.RULEGRAPH_END)]
    current = update_docs.rule_edges(update_docs.rulegraph())
    assert ("prepare_corpus", "train_model") in current and ("metrics_table", "all") in current
    assert update_docs.rule_edges(shown) == current, "docs/dag.md's rule graph is stale: run `make docs`"


def test_documented_module_reach_is_current(repo, update_docs):
    dag = (repo / "docs" / "dag.md").read_text()
    shown = dag[dag.index(update_docs.REACH_BEGIN):dag.index(update_docs.REACH_END) + len(update_docs.REACH_END)]
    assert "| `sample` |" in shown and "| `join_samples` |" in shown
    assert shown == update_docs.reach_block(), "docs/dag.md's table of modules each script reaches is stale: run `make docs`"


COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]{7,40}\b)(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]+\b")


def test_a_commit_hash_in_text_is_found():
    assert COMMIT_HASH.findall("measured at 7f62ba7, 1e-9 and 1000000 and feedbac and a 64-hex " + "ab12" * 16) == [
        "7f62ba7"]


def test_docs_and_readme_name_no_commit_hash(repo):
    """The docs describe the present: history, with its commits, is in CHANGELOG.md and git log."""
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    found = {page.name: COMMIT_HASH.findall(page.read_text()) for page in pages}
    assert not {name: hashes for name, hashes in found.items() if hashes}


# "issue" or "issues" and a tracker's number ("#" allowed), which a reader of the repository cannot look up
ISSUE_REFERENCE = re.compile(r"\bissues?\s+#?\d+", re.I)


def issue_references(text: str) -> list[str]:
    """The tracker references in `text`, each as 'line: reference'."""
    return [f"{text.count(chr(10), 0, found.start()) + 1}: {found[0]}" for found in ISSUE_REFERENCE.finditer(text)]


def test_an_issue_reference_is_found_across_a_line_break_and_a_feature_s_name_is_not():
    first, second = "issue" + "\n57", "Issues #" + "26"  # split: this file names no issue
    assert issue_references(f"the truth ({first}) and {second}") == [f"1: {first}", f"2: {second}"]
    assert issue_references("support recovery; an issue with 2 bytes; tissue 3") == []


def test_no_tracked_file_but_the_changelog_names_an_issue_number(repo):
    """Docs, configs, captions, code and tests name a feature, not the tracker's number for it (CHANGELOG.md is the
    history, where the numbers belong)."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, text=True, check=True)
    found = {}
    for name in filter(None, tracked.stdout.split("\0")):
        path = repo / name
        if name == "CHANGELOG.md" or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:  # a binary file (a figure)
            continue
        if issue_references(text):
            found[name] = issue_references(text)
    assert found == {}, "name the feature instead of its issue number"


MAX_LINE = 119  # characters: a page reads in a terminal or a diff side by side without wrapping


def long_lines(text: str, limit: int = MAX_LINE) -> list[int]:
    """The 1-based numbers of the lines of `text` longer than `limit` characters."""
    return [number for number, line in enumerate(text.splitlines(), 1) if len(line) > limit]


def test_a_line_of_120_characters_is_long_and_one_of_119_is_not():
    assert long_lines("a" * 119 + "\n" + "b" * 120 + "\n\n" + "c" * 300) == [2, 4]


def test_docs_and_readme_lines_fit_119_characters(repo):
    """Generated blocks included: their generators wrap (docs/update_docs.py, oversmooth.workflow.config/outputs)."""
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    found = {page.name: long_lines(page.read_text()) for page in pages}
    assert not {name: lines for name, lines in found.items() if lines}


def test_a_wrapped_line_breaks_a_code_span_only_where_it_is_longer_than_a_line_and_never_an_unbroken_phrase():
    text = "word " * 6 + "`a - b > 0 (the least favourable of 20)` " + unbroken("estimate [interval] 0.1 [0, 0.2]")
    assert list_item(text, width=50).splitlines() == [
        "- word word word word word word", "  `a - b > 0 (the least favourable of 20)`",
        "  estimate [interval] 0.1 [0, 0.2]"]
    assert list_item(text, width=30).splitlines() == [  # the span (41 characters) is longer than a line: it breaks
        "- word word word word word", "  word `a - b > 0 (the least", "  favourable of 20)`",
        "  estimate [interval] 0.1 [0, 0.2]"]
    assert wrap("one two three", width=7) == "one two\nthree"


def test_a_findings_page_becomes_a_block_of_short_lines_that_keeps_every_cell(update_docs):
    table = pd.DataFrame([{"claim": "greedy has the lowest NSMD", "ground_truth": "gt-x", "runs": 3,
                           "test": "NSMD(top_k | bn-4) - NSMD(greedy | bn-4) > 0 (every bottleneck and method: the "
                                   "least favourable of 20)", "estimate": -0.0812, "ci_low": -0.0966,
                           "ci_high": -0.0658, "verdict": "fails"}])
    begin, end, block = update_docs.findings_block("demo", findings_page(table, 0.95))
    assert block.startswith(begin + "\n1 tests: 0 holds, 1 fails, 0 undecided.") and block.endswith("\n" + end)
    assert long_lines(block) == []
    assert ("- **fails**: greedy has the lowest NSMD; against gt-x;\n  test `NSMD(top_k | bn-4) - NSMD(greedy | bn-4) "
            "> 0 (every bottleneck and method: the least favourable of 20)`;\n  runs 3; estimate [interval] -0.0812 "
            "[-0.0966, -0.0658]") in block


def test_a_wrapped_line_never_starts_with_a_list_marker_quote_or_heading():
    for opener in ("+", "-", "*", ">", "#", "1.", "12)"):
        text = "y" * 106 + f" a {opener} b and more words to wrap"
        for line in wrap(text, 110).splitlines()[1:]:
            assert not line.startswith(f"{opener} "), line
    assert wrap("x" * 107 + " block + 1 bytes", 110).splitlines()[1] == "block + 1 bytes"



def test_a_findings_table_with_a_long_cell_breaks_it_at_spaces_within_119_characters(update_docs):
    """A cell longer than a line (a seeded thesis run's test: a code span of 140 characters) breaks across lines at
    its spaces, its column's name on the line of its first word: every line fits, and the words give it back."""
    test = ("`min over k >= 64 of (TTO(bn-k) - TTO(bn-256)) - (TTO(bn-k) | 3 seeds - TTO(bn-256)) > 0 "
            "(every matched rank k: the least favourable of 12)`")
    assert len(test) == 140
    row = f"| it levels off beyond k = 64 | gt-smollm2 | {test} | 3 | 0.0123 [0.0101, 0.0145] | **holds** |"
    table = "\n".join(["| claim | against | test | runs | estimate [interval] | verdict |", "|" + "---|" * 6, row])
    lines = update_docs.table_as_list(table).splitlines()
    assert long_lines("\n".join(lines)) == [], lines
    assert any(re.search(r"(^| )test `min( |$)", line) for line in lines), lines
    assert " ".join(" ".join(lines).split()) == ("- **holds**: it levels off beyond k = 64; against gt-smollm2; "
                                                 f"test {test}; runs 3; estimate [interval] 0.0123 [0.0101, 0.0145]")


def test_the_support_block_is_the_teacher_run_s_table_with_intervals_and_its_figure(update_docs, tmp_path):
    (tmp_path / "tables").mkdir()
    pd.DataFrame([{"model": "bn-4", "method": "pure", "parameter": float("nan"), "false_support_mean": 0.25,
                   "false_support_ci_low": 0.2, "false_support_ci_high": 0.3, "lost_support_mean": 0.0,
                   "lost_support_ci_low": 0.0, "lost_support_ci_high": 0.0, "inseparable_mean": 0.5,
                   "inseparable_ci_low": 0.4, "inseparable_ci_high": 0.6},
                  {"model": "bn-4", "method": "epsilon", "parameter": 0.003, "false_support_mean": 0.05,
                   "false_support_ci_low": 0.04, "false_support_ci_high": 0.06, "lost_support_mean": 0.1,
                   "lost_support_ci_low": 0.09, "lost_support_ci_high": 0.11, "inseparable_mean": float("nan"),
                   "inseparable_ci_low": float("nan"), "inseparable_ci_high": float("nan")}],
                 ).to_csv(tmp_path / "tables" / "table_support.csv", index=False)
    block = update_docs.support_block(tmp_path)
    assert block.startswith(update_docs.SUPPORT_BEGIN) and block.endswith(update_docs.SUPPORT_END)
    assert "| bn-4 | pure |  | 0.250 [0.200, 0.300] | 0.000 [0.000, 0.000] | 0.500 [0.400, 0.600] |" in block
    assert "| bn-4 | epsilon | 0.003 | 0.050 [0.040, 0.060] | 0.100 [0.090, 0.110] |  |" in block
    assert long_lines(block) == []
    assert update_docs.support_block(tmp_path / "absent") is None


def test_the_readme_s_figures_of_what_the_demo_finds_are_docs_results_md_s(repo, update_docs):
    """The README quotes the findings docs/results.md's generated blocks hold (`make docs` writes both)."""
    results = (repo / "docs" / "results.md").read_text()
    assert [truth for truth, _ in update_docs.claim_estimates(results, "demo", update_docs.FULL_RANK_CLAIM)] == [
        "gt-smollm2", "gt-nanogpt"]
    readme = (repo / "README.md").read_text()
    begin, end = update_docs.FINDS_BEGIN, update_docs.FINDS_END
    shown = readme[readme.index(begin):readme.index(end) + len(end)]
    assert shown == update_docs.finds_block(results), "the README's findings are stale: run `make docs`"


DEMO_TIMES_BEGIN, DEMO_TIMES_END = "<!-- demo-times:begin -->", "<!-- demo-times:end -->"


def demo_times(performance: str) -> dict[str, list[int]]:
    """The seconds of each measured `make demo` in docs/performance.md's table of runs, per machine."""
    table = performance[performance.index(DEMO_TIMES_BEGIN):performance.index(DEMO_TIMES_END)]
    times: dict[str, list[int]] = {}
    for machine, minutes, seconds in re.findall(r"^\| ([^|]+?) \| (\d+) min (\d+) s \|", table, re.M):
        times.setdefault(machine, []).append(int(minutes) * 60 + int(seconds))
    return times


def test_the_readme_s_demo_time_covers_every_measured_make_demo_on_both_machines(repo):
    times = demo_times((repo / "docs" / "performance.md").read_text())
    assert set(times) == {"faster (AVX-512)", "slower (AVX2)"}, times
    readme = " ".join((repo / "README.md").read_text().split())
    low, high = map(int, re.search(r"`make demo` leaves every table and figure under `results/` in (\d+) to (\d+) "
                                   r"minutes", readme).groups())
    measured = [seconds for runs in times.values() for seconds in runs]
    assert low * 60 <= min(measured) and max(measured) <= high * 60, (
        f"the README says {low} to {high} minutes; docs/performance.md measured {sorted(measured)} s")
