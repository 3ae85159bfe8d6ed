"""Examples in the README, in docs/ and in docstrings run as written.

In the Markdown pages, ```python blocks run (each ``print`` states its output in a
trailing comment) and ```py blocks are illustrative (they need a server or a cloud
project). The README's ```bash blocks under a "Quickstart" heading run too, through the
real command line, in document order with its Python blocks, in one scratch directory.
"""

import builtins
import doctest
import functools
import importlib
import importlib.util
import pathlib
import re
import shlex

import pytest

from tfseqrec import cli

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").rglob("*.md"))
PAGES = [REPO / "README.md", *DOCS, REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md"]
README_MAX_LINES = 250
TABLE_BEGIN, TABLE_END = "<!-- table:results:begin -->", "<!-- table:results:end -->"
# A fenced block, or a heading outside one; code blocks are consumed whole, so their
# "# comments" never read as headings.
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```|^(#{1,6} [^\n]*)$", flags=re.M | re.S)


def _blocks(path):
    """``(language, code, heading)`` of each fenced block of ``path``, in order."""
    heading, blocks = "", []
    for match in BLOCK.finditer(path.read_text(encoding="utf-8")):
        if match.group(3):
            heading = match.group(3)
        else:
            blocks.append((match.group(1), match.group(2), heading))
    return blocks


def _run_python(code, where):
    printed = []

    def record(*args, sep=" ", end="\n", file=None, flush=False):
        # Only the example's own prints are compared; Keras progress bars are not.
        if file is None:
            printed.append(sep.join(map(str, args)))
        else:
            builtins.print(*args, sep=sep, end=end, file=file, flush=flush)

    exec(compile(code, where, "exec"), {"__name__": "__docs__", "print": record})
    expected = [m.strip() for m in re.findall(r"print\(.*\)[ \t]*#[ \t]*(.*)", code)]
    assert [line.strip() for line in printed] == expected, where


def _commands(code):
    """The commands of a bash block: continued lines joined, comments dropped."""
    commands, pending = [], ""
    for line in code.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on over the next line
            continue
        pending = ""
        if words:
            commands.append(words)
    assert not pending, f"unclosed quote in {pending!r}"
    return commands


def _run_bash(code, where):
    for words in _commands(code):
        assert words[0] == "tfseqrec", f"{where}: only tfseqrec commands run here, got {words}"
        assert cli.main(words[1:]) == 0, f"{where}: {shlex.join(words)} failed"


@pytest.fixture
def scratch(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("TFSEQREC_DATA", str(data_root))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_quickstarts_run(scratch):
    ran = []
    for n, (language, code, heading) in enumerate(_blocks(REPO / "README.md")):
        where = f"README.md block {n + 1} ({heading})"
        if language == "python":
            _run_python(code, where)
            ran.append(language)
        elif language == "bash" and "quickstart" in heading.lower():
            _run_bash(code, where)
            ran.append(language)
    assert ran.count("python") >= 2 and ran.count("bash") == 1, ran
    assert sorted(p.name for p in (scratch / "saved_models" / "ml100k").iterdir()) == ["1", "2"]


def test_readme_bash_quickstart_covers_the_workflow():
    (code,) = [
        c for lang, c, h in _blocks(REPO / "README.md") if lang == "bash" and "quickstart" in h.lower()
    ]
    assert [words[1] for words in _commands(code)] == ["train", "evaluate", "recommend", "export"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_documented_commands_parse(page):
    """Every ``tfseqrec`` command shown in a bash block has real subcommands and flags."""
    parser = cli.build_parser()
    for language, code, heading in _blocks(page):
        for words in _commands(code) if language == "bash" else []:
            if words[0] != "tfseqrec":
                continue
            try:
                parser.parse_args(words[1:])
            except SystemExit:
                pytest.fail(f"{page.relative_to(REPO)} ({heading}): {shlex.join(words)} does not parse")


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_docs_python_examples_run(page, scratch):
    for n, (language, code, _) in enumerate(_blocks(page)):
        if language == "python":
            _run_python(code, f"{page.relative_to(REPO)} block {n + 1}")


def test_readme_is_a_front_page():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert text.count(TABLE_BEGIN) == 1 and text.count(TABLE_END) == 1
    assert text.index(TABLE_BEGIN) < text.index(TABLE_END)
    # A newcomer reaches a trained, evaluated and exported model in the first screenful.
    first_screen = "\n".join(text.splitlines()[:60])
    for call in ("model.fit(", "tfseqrec.evaluate(", "model.recommend(", "export_model("):
        assert call in first_screen, call


def _user_text(page):
    text = page.read_text(encoding="utf-8")
    if TABLE_BEGIN in text:  # the results table is generated from the stored runs
        text = text[: text.index(TABLE_BEGIN)] + text[text.index(TABLE_END) :]
    return text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_user_docs_carry_no_commit_hashes_or_dates(page):
    text = _user_text(page)
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text)
    dates = re.findall(r"\b20\d\d-\d\d-\d\d\b|\b\d\d:\d\d(?:-\d\d:\d\d)? UTC\b", text)
    assert not hashes and not dates, (hashes, dates)


@functools.cache
def _protocols():
    """``benchmarks/protocols.py``, loaded from its file (the benchmarks are no package)."""
    spec = importlib.util.spec_from_file_location("protocols", REPO / "benchmarks" / "protocols.py")
    protocols = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(protocols)
    return protocols


# The changelog records what each release measured then; it is history, not a claim of today.
@pytest.mark.parametrize(
    "page", [p for p in PAGES if p.name != "CHANGELOG.md"], ids=lambda p: str(p.relative_to(REPO))
)
def test_user_docs_quote_no_measured_figure_by_hand(page):
    # A measured NDCG@10 or HR@10 typed into a page goes stale when its run is redone: the
    # pages point at the generated tables instead, and quote only published figures.
    figures = set(_protocols().FIGURE.findall(_user_text(page)))
    published = _protocols().published_figures()
    assert figures <= published, sorted(figures - published)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", _user_text(page)):
        if re.match(r"[a-z]+:|#", target):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page.relative_to(REPO)} links to {target}, which does not exist"


def _modules_with_examples():
    """Every package module whose source holds a ``>>>`` example."""
    modules = []
    for path in sorted((REPO / "tfseqrec").rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_examples_are_found():
    assert {"tfseqrec.kinds", "tfseqrec.losses", "tfseqrec.models.recformer.tasks"} <= set(
        _modules_with_examples()
    )


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
