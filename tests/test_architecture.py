"""The layout (docs/architecture.md): the handout's map and the five commands at the top, the library in minbert/,
imports only down the layers and never in a circle, settings as typed objects below the one builder, modules of
a readable size, and the handout's names where the handout puts them."""
import ast
import importlib
import inspect
import re
import subprocess
import sys

import pytest

from tests.course import ROOT

HANDOUT = {"bert", "base_bert", "config", "tokenizer", "optimizer", "optimizer_test", "sanity_check", "classifier",
           "multitask_classifier", "datasets", "evaluation", "utils", "prepare_submit"}
COMMANDS = {"pretrain", "ensemble", "sweep", "report", "bench"}
SCRIPTS = {"optimizer_test", "sanity_check", "classifier", "multitask_classifier", "prepare_submit"} | COMMANDS
# Lowest first; a module imports only from its own layer or lower. Anything not named is an entry point (layer 8).
LAYERS = [
    {"utils", "config", "optimizer", "minbert.cli", "minbert.scoring", "minbert.specs", "minbert.flag", "minbert.files", "minbert.safe_load", "minbert.project_paths", "minbert.hub", "minbert.course_data",
     "minbert.course_files", "minbert.shapes", "minbert.precision", "minbert.dropout", "minbert.embedding_grad"},
    {"base_bert", "bert", "tokenizer", "datasets", "evaluation"},
    {"minbert.finetuning", "minbert.runs", "minbert.submit"},
    {"minbert.tasks"},
    {"minbert.objectives"},
    {"minbert.training"},
    {"minbert.flags", "minbert.pipelines", "minbert.sweeps", "minbert.reports", "minbert.bench"},
]
# A module's size follows its concern, never a count; one grown past this holds more than one concern.
MAX_LINES = 500


def _modules():
    """{module name: path} of every project module: the top-level files, the package, tools/."""
    found = {p.stem: p for p in ROOT.glob("*.py")}
    found.update({".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
                  for p in (ROOT / "minbert").rglob("*.py")})
    found.update({f"tools.{p.stem}": p for p in (ROOT / "tools").glob("*.py")})
    return found


def _layer(name):
    for i, members in enumerate(LAYERS):
        if any(name == m or name.startswith(m + ".") for m in members):
            return i
    return len(LAYERS)


def _project_imports(path, modules):
    """[(imported module, line, at module level)] of the project modules `path` imports."""
    out = []
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for name in names:
            if name in modules:
                out.append((name, node.lineno, id(node) in top))
    return out


def test_the_top_level_is_the_handouts_map_and_the_commands():
    assert {p.stem for p in ROOT.glob("*.py")} == HANDOUT | COMMANDS
    assert (ROOT / "setup.sh").is_file() and (ROOT / "data").is_dir() and (ROOT / "predictions").is_dir()


def test_imports_go_down_the_layers_at_the_top_of_each_file_and_never_in_a_circle():
    modules = _modules()
    graph, problems = {}, []
    for name, path in modules.items():
        graph[name] = set()
        for imported, line, top in _project_imports(path, modules):
            graph[name].add(imported)
            where = f"{path.relative_to(ROOT)}:{line} imports {imported}"
            if not top and not name.startswith("tools."):
                problems.append(f"{where} inside a function (project imports go at the top)")
            if _layer(imported) > _layer(name):
                problems.append(f"{where}, a higher layer")
            if imported.split(".")[0] in SCRIPTS and imported != name:
                problems.append(f"{where}, a script")
    assert not problems, "\n".join(problems)
    done, stack = set(), []

    def visit(n):  # depth-first search for a circle
        if n in stack:
            pytest.fail("import circle: " + " -> ".join(stack[stack.index(n):] + [n]))
        if n in done:
            return
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            visit(m)
        stack.pop()
        done.add(n)
    for n in sorted(graph):
        visit(n)


def _first_import_beyond_the_standard_library(path, seen):
    """The first module outside the standard library that running `path` loads, following the project's own
    modules in the order their top-level imports run: "minbert.cli" once that is reached (its hook is then in
    place), else the foreign module (torch, numpy, ...) loaded before it, or None."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] in sys.stdlib_module_names:
                continue
            for i in range(1, len(parts) + 1):  # `import a.b.c` runs a, then a.b, then a.b.c
                module = ".".join(parts[:i])
                if module == "minbert.cli":
                    return module
                file = next((f for f in (ROOT.joinpath(*parts[:i]).with_suffix(".py"),
                                         ROOT.joinpath(*parts[:i], "__init__.py")) if f.is_file()), None)
                if file is None:
                    if i == 1:
                        return module  # a package from outside the project
                    break  # `from package import name` where name is no module
                if file not in seen:
                    seen.add(file)
                    found = _first_import_beyond_the_standard_library(file, seen)
                    if found:
                        return found
    return None


def test_every_script_sets_the_ctrl_c_line_before_torch_loads():
    """Importing torch takes seconds, and a Ctrl-C in that time is met before main_guard runs: minbert.cli's
    hook turns it into main_guard's one line, so every script that promises that line (all but four tools)
    loads minbert.cli before any other package."""
    scripts = [p for p in [*ROOT.glob("*.py"), *(ROOT / "gpt2").glob("*.py"), *(ROOT / "tools").glob("*.py")]
               if "main_guard(main)" in p.read_text()]
    assert len(scripts) > 20
    late = {str(p.relative_to(ROOT)): first for p in scripts
            if (first := _first_import_beyond_the_standard_library(p, set())) not in ("minbert.cli", None)}
    assert not late, f"these load a package before minbert.cli: {late}"


def test_below_the_builder_nothing_reads_an_argparse_namespace():
    # typed.py parses the command line into its Namespace; settings.py builds the settings objects from it
    builders = {ROOT / "minbert" / "flags" / "settings.py", ROOT / "minbert" / "flags" / "typed.py"}
    for path in (ROOT / "minbert").rglob("*.py"):
        text = path.read_text()
        if path not in builders:
            assert not re.search(r"\bargs\.|Namespace", text), f"{path.relative_to(ROOT)} reads a namespace"


def test_modules_are_of_a_readable_size_and_packages_hold_no_logic():
    for path in [*ROOT.glob("*.py"), *(ROOT / "minbert").rglob("*.py"), *(ROOT / "gpt2").rglob("*.py")]:
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_LINES, f"{path.relative_to(ROOT)}: {lines} lines (split it by concern)"
    for init in [*(ROOT / "minbert").rglob("__init__.py"), *(ROOT / "gpt2").rglob("__init__.py")]:
        tree = ast.parse(init.read_text())
        assert len(tree.body) == 1 and isinstance(tree.body[0].value, ast.Constant), f"{init}: only a docstring"


def test_every_module_has_its_test_file_where_the_tree_says():
    modules = [*ROOT.glob("*.py"), *(p for pkg in ("minbert", "gpt2") for p in (ROOT / pkg).rglob("*.py")
                                     if p.name != "__init__.py"), *(ROOT / "tools").glob("*.py")]
    missing = [str(p.relative_to(ROOT)) for p in modules
               if not (ROOT / "tests" / p.parent.relative_to(ROOT) / f"test_{p.stem}.py").is_file()]
    assert not missing, f"no test file for {missing}"


def test_the_settings_are_frozen():
    specs = importlib.import_module("minbert.specs")
    for name, cls in vars(specs).items():
        if inspect.isclass(cls) and cls.__module__ == "minbert.specs" and hasattr(cls, "__dataclass_params__"):
            assert cls.__dataclass_params__.frozen, name


def test_an_old_module_name_fails_loudly(tmp_path):
    """`runs/` is the output folder and runs.py an earlier module: a stale import of the module's names fails (the
    folder, which holds no Python file, is no module that has them)."""
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    out = subprocess.run([sys.executable, "-c", "from runs import open_run"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.returncode == 1 and "ImportError" in out.stderr
    for old in ("lora", "trainer", "flags", "checkpoint", "multitask", "losses"):
        out = subprocess.run([sys.executable, "-c", f"import {old}"], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 1 and "ModuleNotFoundError" in out.stderr, old


def test_the_handouts_names_are_where_it_says():
    """Handout sections 3, 4 and 5.2 name these; each is importable from the file it names."""
    names = {"bert": ["BertSelfAttention.attention", "BertLayer.add_norm", "BertLayer.forward", "BertModel.embed"],
             "classifier": ["BertSentimentClassifier", "train", "test", "model_eval", "get_args"],
             "optimizer": ["AdamW.step"], "tokenizer": ["BertTokenizer"], "base_bert": ["BertPreTrainedModel"],
             "config": ["BertConfig"],
             "multitask_classifier": ["MultitaskBERT", "MultitaskBERT.forward", "MultitaskBERT.predict_sentiment",
                                      "MultitaskBERT.predict_paraphrase", "MultitaskBERT.predict_similarity",
                                      "train_multitask", "test_multitask", "get_args"],
             "evaluation": ["model_eval_multitask"],
             "datasets": ["SentenceClassificationDataset", "SentencePairDataset"]}
    for module, attrs in names.items():
        m = importlib.import_module(module)
        for attr in attrs:
            obj = m
            for part in attr.split("."):
                obj = getattr(obj, part)
            assert callable(obj), f"{module}.{attr}"


# The parameters the starter code gives the methods the handout asks students to write (sections 3.2, 4 and 5.2),
# and every function and class of its classifier.py and multitask_classifier.py, in order: ours take them so (any
# further parameter has a default), so a student's code calls ours unchanged.
STARTER_SIGNATURES = {
    "bert.BertSelfAttention.attention": ["self", "key", "query", "value", "attention_mask"],
    "bert.BertLayer.add_norm": ["self", "input", "output", "dense_layer", "dropout", "ln_layer"],
    "bert.BertLayer.forward": ["self", "hidden_states", "attention_mask"],
    "bert.BertModel.embed": ["self", "input_ids"],
    "bert.BertModel.forward": ["self", "input_ids", "attention_mask"],
    "optimizer.AdamW.__init__": ["self", "params", "lr", "betas", "eps", "weight_decay", "correct_bias"],
    "optimizer.AdamW.step": ["self", "closure"],
    "classifier.BertSentimentClassifier.forward": ["self", "input_ids", "attention_mask"],
    "multitask_classifier.MultitaskBERT.forward": ["self", "input_ids", "attention_mask"],
    "multitask_classifier.MultitaskBERT.predict_sentiment": ["self", "input_ids", "attention_mask"],
    "multitask_classifier.MultitaskBERT.predict_paraphrase": ["self", "input_ids_1", "attention_mask_1", "input_ids_2",
                                                              "attention_mask_2"],
    "multitask_classifier.MultitaskBERT.predict_similarity": ["self", "input_ids_1", "attention_mask_1", "input_ids_2",
                                                              "attention_mask_2"],
    "classifier.get_args": [], "multitask_classifier.get_args": [],
    "classifier.seed_everything": ["seed"], "multitask_classifier.seed_everything": ["seed"],
    "classifier.BertSentimentClassifier.__init__": ["self", "config"],
    "multitask_classifier.MultitaskBERT.__init__": ["self", "config"],
    **{f"classifier.{c}.{m}": p for c in ("SentimentDataset", "SentimentTestDataset")
       for m, p in (("__init__", ["self", "dataset", "args"]), ("__len__", ["self"]),
                    ("__getitem__", ["self", "idx"]), ("pad_data", ["self", "data"]),
                    ("collate_fn", ["self", "all_data"]))},
    "classifier.load_data": ["filename", "flag"],
    "classifier.model_eval": ["dataloader", "model", "device"],
    "classifier.model_test_eval": ["dataloader", "model", "device"],
    "classifier.save_model": ["model", "optimizer", "args", "config", "filepath"],
    "multitask_classifier.save_model": ["model", "optimizer", "args", "config", "filepath"],
    "classifier.train": ["args"], "classifier.test": ["args"],
    "multitask_classifier.train_multitask": ["args"], "multitask_classifier.test_multitask": ["args"],
}
# The starter's defaults among those parameters.
STARTER_DEFAULTS = {"classifier.seed_everything": {"seed": 11711},
                    "multitask_classifier.seed_everything": {"seed": 11711}, "classifier.load_data": {"flag": "train"}}
# The starter's module constants.
STARTER_CONSTANTS = {"classifier": ["TQDM_DISABLE"],
                     "multitask_classifier": ["TQDM_DISABLE", "BERT_HIDDEN_SIZE", "N_SENTIMENT_CLASSES"]}


@pytest.mark.parametrize("name", sorted(STARTER_SIGNATURES))
def test_the_handouts_methods_take_the_starters_parameters(name):
    module, *path = name.split(".")
    obj = importlib.import_module(module)
    for part in path:
        obj = getattr(obj, part)
    params = list(inspect.signature(obj).parameters.values())
    want = STARTER_SIGNATURES[name]
    assert [p.name for p in params[:len(want)]] == want, name
    assert all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params[len(want):]), name
    for param, value in STARTER_DEFAULTS.get(name, {}).items():
        assert inspect.signature(obj).parameters[param].default == value, (name, param)


@pytest.mark.parametrize("module", sorted(STARTER_CONSTANTS))
def test_every_starter_name_of_the_two_scripts_is_exported(module):
    """A name of the starter's classifier.py or multitask_classifier.py is in the script's __all__ (so `from
    classifier import *` gives it too), and its constants are there."""
    m = importlib.import_module(module)
    starter = {n.split(".")[1] for n in STARTER_SIGNATURES if n.startswith(module + ".")}
    starter |= set(STARTER_CONSTANTS[module])
    assert starter <= set(m.__all__), sorted(starter - set(m.__all__))
    assert all(hasattr(m, n) for n in m.__all__)
