"""The documentation says what the code does: the README is short and names every top-level file, RESULTS.md says
how each table was made, every path a page, docstring or comment names is there, and no page or docstring speaks
of how the work was organised. (docs/flags.md against the parsers: tests/tools/test_flag_docs.py.)"""
import ast
import os
import re
import subprocess
from pathlib import Path

from tests.course import ROOT


def test_readme_is_short_and_maps_every_top_level_file():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    missing = [p.name for p in ROOT.glob("*.py") if f"`{p.name}`" not in readme]
    assert not missing, f"not in the README's file map: {missing}"


def test_every_results_table_says_how_it_was_made():
    text = (ROOT / "RESULTS.md").read_text()
    sections = re.split(r"\n(?=#{2,3} )", text)
    for section in sections:
        if not any(line.startswith("|") for line in section.splitlines()):
            continue
        title = section.splitlines()[0]
        for label in ("**Command:**", "**Machine:**", "**Precision:**", "**Seeds:**"):
            assert label in section, f"{title}: no {label}"


BANNED = re.compile(r"\bissues?\b|\bsessions?\b|\blent\b|\bmy (tests|reading|runs?)\b|\bjudge\b", re.IGNORECASE)


def _docstrings(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def test_no_page_or_docstring_speaks_of_how_the_work_was_organised():
    found = []
    pages = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "tools" / "plans").glob("*.txt")]
    for page in pages:
        found += [f"{page.name}: {line.strip()}" for line in page.read_text().splitlines() if BANNED.search(line)]
    for path in [*ROOT.glob("*.py"), *(ROOT / "minbert").rglob("*.py"), *(ROOT / "tools").glob("*.py"),
                 *(ROOT / "tests").rglob("*.py")]:
        found += [f"{path.name}: {line.strip()}" for doc in _docstrings(path) for line in doc.splitlines()
                  if BANNED.search(line)]
        found += [f"{path.name}: {line.strip()}" for line in path.read_text().splitlines()
                  if "#" in line and BANNED.search(line.split("#", 1)[1])]
    assert not found, "\n".join(found[:20])


# ----------------------------------------------------------------------------- every path named in prose exists

# A path in prose: folders joined by slashes, ending in a file with one of these extensions or in a slash, or a
# bare module's file name. Each part starts where no other path character stands, so that a URL's parts and
# an absolute path (outside the project) are never read as paths of it.
EXTENSIONS = ("py", "md", "txt", "csv", "tsv", "json", "jsonl", "npy", "npz", "pt", "sh", "ini", "data", "zip",
              "safetensors", "bin", "log", "db", "bak", "png", "pdf", "html")
PATH = re.compile(r"(?<![\w/.~-])((?:[A-Za-z_][\w.-]*/)+(?:[\w.-]*\.(?:" + "|".join(EXTENSIONS) + r")\b)?"
                  r"|[A-Za-z_][\w.-]*\.py\b)(?![\w/-])")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
# A placeholder stands for a value a command fills in: runs/NAME/, tools/NAME.py, DATA_DIR/sts-dev.csv.
PLACEHOLDER = re.compile(r"[A-Z]{3,}")
# Python's comments and strings, in one pass (ast and tokenize take seconds over the project): a comment, or a
# string, with the indentation before it when it opens its line (a docstring does).
LEXEME = re.compile(r"(?P<comment>#[^\n]*)|(?P<indent>^[ \t]*)?(?P<string>[rRbBuUfF]{0,2}(?:"
                    r'"""[\s\S]*?(?<!\\)"""|' r"'''[\s\S]*?(?<!\\)'''|"
                    r'"(?:\\.|[^"\\\n])*"|' r"'(?:\\.|[^'\\\n])*'))", re.M)
# Paths that are not there on purpose, each where it is named: the files docs/architecture.md's worked examples
# would add, other projects' code, an earlier module a test names as one, a test's own toy project.
NAMED_ON_PURPOSE = {
    ("docs/architecture.md", "minbert/objectives/toy.py"): "the worked example of a new regulariser",
    ("docs/architecture.md", "minbert/finetuning/ia3.py"): "the worked example of a new fine-tuning method",
    ("docs/architecture.md", "tests/minbert/finetuning/test_ia3.py"): "the same example's test",
    ("minbert/objectives/smart.py", "mt_dnn/perturbation.py"): "the SMART authors' code",
    ("minbert/tasks/nsp.py", "create_pretraining_data.py"): "BERT's reference code",
    ("tests/test_architecture.py", "runs.py"): "the earlier module whose stale import the test makes",
    ("tests/tools/test_mutation.py", "calc.py"): "the toy project the test writes",
}


def _tracked():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.split("\0") if f]


def _prose_of_python(text):
    """[(line, text)] of a Python file's comments and docstrings (triple-quoted strings opening their line)."""
    out = []
    for m in LEXEME.finditer(text):
        string = m.group("string")
        if m.group("comment") or (m.group("indent") is not None and string[-3:] in ('"""', "'''")
                                  and len(string) >= 6):
            out.append((text.count("\n", 0, m.start()) + 1, m.group("comment") or string))
    return out


def _prose_of_markdown(text):
    """[(line, text)] of a page. A table of earlier names (`| earlier | now |`) names what is no longer there on
    purpose: its rows are read without the names of their first column."""
    out, earlier = [], False
    for i, line in enumerate(text.splitlines(), 1):
        earlier = line.startswith("|") and (earlier or line.replace(" ", "").startswith("|earlier|"))
        if earlier and line.count("|") > 2:
            _, first, line = line.split("|", 2)
            for name in re.findall(r"`[^`]+`", first):
                line = line.replace(name, "")
        out.append((i, line))
    return out


def _bases(source):
    """The folders a path named in `source` may be relative to: the project's, the package's (the docs name its
    modules from there: flags/table.py), gpt2/'s (its scripts run there), the file's own folder and those above
    it, and for a test the folder of the module it mirrors and those above."""
    here = Path(source).parent
    mirror = here.relative_to("tests") if here.parts[:1] == ("tests",) else here
    return list(dict.fromkeys(str(b) for b in (Path(), Path("minbert"), Path("gpt2"), here, *here.parents, mirror,
                                               *mirror.parents)))


def stale_paths(sources, tracked):
    """[(source, line, path)] of the paths named in `sources` ({project-relative file: [(line, text)]}) that are
    not there: no file or folder of that name relative to any of the source's bases, not an output the project
    never tracks (.gitignore: run folders, predictions, checkpoints, the course data, the zip), no placeholder
    and not named on purpose. A link is relative to its page's folder only."""
    names = {Path(f).name for f in tracked}
    found = []  # (source, line, path, the project-relative paths it may mean)
    for source, chunks in sources.items():
        bases, page = _bases(source), str(Path(source).parent)
        for line, text in chunks:
            tokens = [(m.group(1), bases) for m in PATH.finditer(text)]
            tokens += [(m.group(1), [page]) for m in LINK.finditer(text) if ":" not in m.group(1)]
            for token, where in tokens:
                if (source, token) in NAMED_ON_PURPOSE or (PLACEHOLDER.search(token)
                                                           and Path(token).name not in names):
                    continue
                if "/" not in token.rstrip("/") and where is bases:
                    # A bare module's file name names a file of that name somewhere; a bare folder's name (a
                    # test's ck/) says too little to check.
                    if token.endswith(".py") and token not in names:
                        found.append((source, line, token, []))
                    continue
                paths = [os.path.normpath(os.path.join(b, token)) + ("/" if token.endswith("/") else "")
                         for b in where]
                if not any((ROOT / p).exists() for p in paths):
                    found.append((source, line, token, [p for p in paths if not p.startswith("..")]))
    candidates = sorted({p for *_, paths in found for p in paths})
    ignored = set(subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, capture_output=True,
                                 input="\n".join(candidates), text=True).stdout.splitlines()) if candidates else set()
    return [(source, line, token) for source, line, token, paths in found if not ignored.intersection(paths)]


def test_every_path_named_in_prose_is_there():
    """Every path a page, a docstring or a comment names is a file or folder of the project, or an output a run
    writes: a file that moved leaves no pointer to where it was."""
    tracked = _tracked()
    sources = {f: (_prose_of_markdown if f.endswith(".md") else _prose_of_python)((ROOT / f).read_text())
               for f in tracked if f.endswith((".md", ".py"))}
    stale = stale_paths(sources, tracked)
    assert not stale, "\n".join(f"{source}:{line}: {path} is not there" for source, line, path in stale)


def test_a_path_that_is_not_there_is_found():
    """The check on a made-up page and module: each path that is not there is named, with its line; one that is
    there, an output, a placeholder, an earlier name in its table and a string of code are not."""
    tracked = _tracked()
    page = _prose_of_markdown("See `minbert/flags/table.py`, [the flags](flags.md), `tools/NAME.py`, `runs/NAME/` "
                              "and\n`predictions/sst-dev-output.csv`; but `minbert/flags/gone.py`, [x](nowhere.md)"
                              ",\n`docs/RESULTS.md`, extra_tasks.py and [y](docs/flags.md) are not there.\n"
                              "| earlier | now |\n|---|---|\n| `extra_tasks.py` | `minbert/tasks/extra.py` |\n"
                              "| `old.py` | `minbert/tasks/gone.py` (`old.py` is `gone.py`) |\n")
    code = _prose_of_python('"""Reads flags/typed.py and runs/folders.py (minbert/), writes ck/mt.pt."""\n'
                            "x = 'not/prose.py'  # gpt2's own models/gpt2.py; flags/parsed.py, which is gone\n"
                            "def f():\n    \"\"\"tasks/gone.py\"\"\"\n")
    assert stale_paths({"docs/page.md": page, "minbert/runs/x.py": code}, tracked) == [
        ("docs/page.md", 2, "minbert/flags/gone.py"), ("docs/page.md", 2, "nowhere.md"),
        ("docs/page.md", 3, "docs/RESULTS.md"), ("docs/page.md", 3, "extra_tasks.py"),
        ("docs/page.md", 3, "docs/flags.md"), ("docs/page.md", 7, "minbert/tasks/gone.py"),
        ("docs/page.md", 7, "gone.py"),
        ("minbert/runs/x.py", 2, "flags/parsed.py"), ("minbert/runs/x.py", 4, "tasks/gone.py")]
