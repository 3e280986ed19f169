"""The documentation (README.md, CONTRIBUTING.md, labs/README.md and the pages in docs/) is short, says
what is, and describes the tree as it is:

- README.md at most README_WORDS words, each page of docs/ at most PAGE_WORDS, all together TOTAL_WORDS;
- every path in backticks that starts at the checkout's top (`harness/registry.py`, `labs/*.toml`) names
  something that exists, placeholders (LAB, <id>, *) matching at least one; every dotted name of the
  harness or a level (`harness.base.LeNet`) names a module, or a name defined in one;
- every `make TARGET` is a target of the Makefile, every `python -m harness COMMAND` a command some
  wing declares; every link between pages reaches a file;
- no page narrates history: no date outside code, no "until ...", "no longer", "used to";
- docs/design.md's import order is tests/test_layout.py's, wing by wing and room by room, and names
  every wing's folder;
- a term is defined in docs/glossary.md only;
- the site builds with `mkdocs build --strict` (skipped, saying so, where MkDocs is not installed:
  the `dev` extra installs it).
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_layout import APART, LAB_RANK, RANK, ROOMS

README_WORDS, PAGE_WORDS, TOTAL_WORDS = 2000, 2500, 12000
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# Every Markdown file a reader is pointed at (the word limits count README.md and docs/ only).
ALL = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "labs" / "README.md", *PAGES]
# Packages a guide invents to show how to add one: never in the tree.
EXAMPLES = {"lenet_tvm", "lenet_NAME"}
# The top-level folders a path in the docs may start with, present or not (a typo is then caught).
TOP = {"harness", "labs", "docs", "studies", "reports", "tests", "scripts", "weights", "data"}
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`([^`\n]+)`")


def words(path: Path) -> int:
    return len(path.read_text().split())


def code_spans(text: str) -> list[str]:
    """Every piece of code in a page: inline spans, and each line of its fenced blocks, split into words."""
    spans = CODE.findall(FENCE.sub("", text))
    for block in FENCE.findall(text):
        spans += block.split()
    return spans


def prose(text: str) -> str:
    """The page without its code: fenced blocks and inline spans removed."""
    return CODE.sub("", FENCE.sub("", text))


def tracked_tops() -> set[str]:
    """The checkout's top-level names that git tracks (build outputs, .venv and caches are not the tree)."""
    done = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return {p.name for p in ROOT.iterdir()}
    return {line.split("/")[0] for line in done.stdout.splitlines()}


def as_glob(token: str) -> list[str]:
    """A path as written, with its placeholders as wildcards: LAB, <run-id>, ... -> *; {a,b} -> each."""
    token = re.sub(r"<[^>]*>", "*", token.replace("...", "*"))
    token = re.sub(r"(?<![\w.])[A-Z][A-Z_]+(?![\w])", "*", token)
    alternatives = re.search(r"\{([^}]*)\}", token)
    if alternatives:
        return [token[:alternatives.start()] + choice + token[alternatives.end():]
                for choice in alternatives.group(1).split(",")]
    return [token]


def named_paths(text: str, tops: set[str]) -> list[str]:
    """The backticked paths that start at the checkout's top."""
    found = []
    for span in code_spans(text):
        token = span.strip().strip("\"',;()[]")
        if " " in token or "=" in token or token.startswith(("-", "~", "$", "/")):
            continue
        first = token.split("/")[0]
        if first in EXAMPLES or not ("/" in token or first in tops):
            continue
        if first in tops or first in TOP:
            found.append(token)
    return found


def defined(module_file: Path, name: str) -> bool:
    source = module_file.read_text()
    return re.search(rf"^\s*(class|def)\s+{name}\b|^{name}\s*[:=]", source, re.M) is not None


def resolves(dotted: str) -> bool:
    """harness.base.LeNet, harness.measure.fastest_call, lenet_cudnn.frontend_device: a module, or a name in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and defined(module, rest[0]))
    return False


def test_the_readme_and_each_page_are_short():
    assert words(ROOT / "README.md") <= README_WORDS, words(ROOT / "README.md")
    long = {p.name: words(p) for p in PAGES if words(p) > PAGE_WORDS}
    assert long == {}, f"pages over {PAGE_WORDS} words: {long}"
    total = words(ROOT / "README.md") + sum(words(p) for p in PAGES)
    assert total <= TOTAL_WORDS, f"README.md and docs/ hold {total} words, more than {TOTAL_WORDS}"


def test_the_readme_answers_a_newcomer_s_three_questions():
    """How to run one study, grade a class and add a level, each under its own heading, with its command."""
    text = (ROOT / "README.md").read_text()
    for heading, command in (("## Run one study", "harness run "), ("## Grade a class", "lab grade "),
                             ("## Add a level", "harness/registry.py")):
        assert heading in text, heading
        assert command in text.split(heading, 1)[1].split("\n## ", 1)[0], (heading, command)
    for page in PAGES:  # every page but the site's home is reachable from the README
        assert page.name == "index.md" or f"docs/{page.name}" in text, f"README.md does not point at docs/{page.name}"


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_named_exists(path):
    tops = tracked_tops()
    missing = [token for token in named_paths(path.read_text(), tops)
               if not any(list(ROOT.glob(pattern.rstrip("/"))) for pattern in as_glob(token))]
    assert missing == [], f"{path.name} names paths that are not in the tree: {missing}"


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dotted_name_resolves(path):
    names = {m.group(0) for span in code_spans(path.read_text())
             for m in re.finditer(r"\b(harness|lenet_[a-z]+)(\.[A-Za-z_]\w*)+", span)}
    bad = sorted(name for name in names if name.split(".")[0] not in EXAMPLES and "__" not in name
                 and not resolves(name))
    assert bad == [], f"{path.name} names modules or names that do not exist: {bad}"


def test_every_make_target_named_exists():
    targets = set(re.findall(r"^([a-zA-Z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    for path in ALL:
        named = {m for span in code_spans(path.read_text()) for m in re.findall(r"\bmake ([a-z][\w-]*)", span)}
        assert named <= targets, f"{path.name}: no such make target: {sorted(named - targets)}"


def test_every_harness_command_named_exists():
    """`python -m harness run`, `... lab grade`: each a command some wing declares."""
    declared = set()
    for module in (ROOT / "harness").rglob("*.py"):  # each wing declares its own, with harness.command
        if "from harness.command import" in (text := module.read_text()):
            declared |= set(re.findall(r"\b[Cc]ommand\(\s*\"([a-z][\w-]*)\"", text))
    assert {"run", "lab", "grade", "gpu-study"} <= declared  # the declarations are found
    for path in ALL:
        text = " ".join(code_spans(path.read_text()))
        named = set(re.findall(r"-m harness (?:--gpu \d+ )?([a-z][\w-]*)", text))
        named |= set(re.findall(r"-m harness (?:--gpu \d+ )?lab ([a-z][\w-]*)", text))
        assert named <= declared, f"{path.name}: no such command: {sorted(named - declared)}"


def test_every_link_reaches_a_file():
    for path in ALL:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", FENCE.sub("", path.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            assert (path.parent / target).exists(), f"{path.name} links to {target}, which is not there"


def test_no_page_narrates_history():
    """Docs say what is: no date in prose (a date in code, an example's due date, is data), no
    "until ..." and no words that tell what the project did before."""
    history = re.compile(r"\b((19|20)\d\d-\d\d-\d\d|(January|February|March|April|May|June|July|August|"
                         r"September|October|November|December) \d{4}|no longer|used to|previously|"
                         r"formerly|any ?more|until (19|20)\d\d|nowadays)\b", re.I)
    for path in ALL:
        for number, line in enumerate(prose(path.read_text()).splitlines(), 1):
            found = history.search(line)
            assert found is None, f"{path.name}, line {number} of its prose: {found.group(0)!r}: {line.strip()}"


def test_the_checks_catch_what_is_not_there():
    """The checkers above can fail: a path, a placeholder and a dotted name that are not in the tree."""
    tops = tracked_tops()
    text = "`harness/registry.py`, `harness/nowhere.py`, `labs/LAB.toml`, `labs/NAME.json`, `lenet_tvm/`, `OUT/x`"
    assert named_paths(text, tops) == ["harness/registry.py", "harness/nowhere.py", "labs/LAB.toml", "labs/NAME.json"]
    assert [bool(list(ROOT.glob(as_glob(t)[0]))) for t in named_paths(text, tops)] == [True, False, True, False]
    assert as_glob("labs/examples/{correct,wrong}/lenet.py") == ["labs/examples/correct/lenet.py",
                                                                 "labs/examples/wrong/lenet.py"]
    assert resolves("harness.base.LeNet") and resolves("harness.measure.fastest_call")
    assert not resolves("harness.base.Nothing") and not resolves("harness.nowhere")


def test_the_design_s_import_order_is_the_layout_test_s():
    text = (DOCS / "design.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith("cli → "))
    written = [{wing.strip() for wing in group.split("|")} for group in line.split("→")]
    ranks = sorted(set(RANK.values()), reverse=True)
    expected = [{"core" if wing == "core" else wing for wing, rank in RANK.items() if rank == r} for r in ranks]
    assert written == expected
    for upper, lower in APART:
        assert f"The {upper} never imports the {lower}" in text
    for wing in (p.name for p in (ROOT / "harness").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert f"`harness/{wing}/`" in text, f"docs/design.md does not name the wing harness/{wing}/"


def rooms_line(ranks: dict[str, int]) -> str:
    """A wing's rooms as the design writes them, top first: `a/` and `b/` → `c/`."""
    levels = sorted({rank for room, rank in ranks.items() if room}, reverse=True)
    return " → ".join(" and ".join(f"`{room}/`" for room in sorted(r for r, k in ranks.items() if k == level and r))
                      for level in levels)


def test_the_design_s_rooms_are_the_layout_test_s():
    text = " ".join((DOCS / "design.md").read_text().split())
    for wing, ranks in {**ROOMS, "harness.lab": LAB_RANK}.items():
        assert rooms_line(ranks) in text, f"docs/design.md: {wing}'s rooms are {rooms_line(ranks)}"
        for room in ranks:
            if room:
                assert (ROOT / Path(*wing.split(".")) / room).is_dir(), (wing, room)


def test_a_term_is_defined_in_the_glossary_only():
    glossary = (DOCS / "glossary.md").read_text()
    terms = re.findall(r"^- \*\*([^*]+)\*\*:", glossary, re.M)
    assert terms, "docs/glossary.md defines no term"
    for path in ALL:
        if path.name == "glossary.md":
            continue
        text = path.read_text()
        for term in terms:
            assert not re.search(rf"\*\*{re.escape(term)}\*\*\s*:", text), f"{path.name} defines {term!r} again"
    assert "glossary.md" in (ROOT / "README.md").read_text()


def test_the_labs_folder_points_at_the_staff_and_students_pages():
    text = (ROOT / "labs" / "README.md").read_text()
    assert "../docs/staff.md" in text and "../docs/students.md" in text and words(ROOT / "labs" / "README.md") < 200


def test_every_page_is_in_the_site_s_nav():
    nav = set(re.findall(r":\s*([\w-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M))
    assert nav == {p.name for p in PAGES}


def test_the_site_builds_strictly(tmp_path):
    missing = [name for name in ("mkdocs", "material") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[dev]' installs MkDocs and Material)")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's banner, not a warning
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "site" / "design" / "index.html").is_file()
