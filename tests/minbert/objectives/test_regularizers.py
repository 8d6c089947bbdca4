"""objectives/regularizers.py: one row per regulariser, and everything reads the table: the loss adds each term
that is on in the table's order (a new row's term too), the parsers declare each row's flags with the settings'
defaults and each pipeline's weight, --recipe handout switches every one off, and no other code names one."""
import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import torch

from minbert.flag import P1, P2
from minbert.flags.defaults import handout, value
from minbert.flags.parsers import classifier_parser, multitask_parser
from minbert.objectives.losses import ClassificationLoss, TermLoss
from minbert.objectives.regularizers import REGULARIZERS, Regularizer, Regularizers, regularizer_weights
from minbert.flag import Chosen, Flag
from tests.checkpoints import sentiment_batch, sentiment_model
from tests.course import ROOT


class Toy(torch.nn.Module):
    """A term of the regularisers' protocol: the squared mean output, and a count of its after-steps."""

    def __init__(self, weight):
        super().__init__()
        self.weight, self.steps = weight, 0

    @classmethod
    def build(cls, spec, model, total_steps):
        return cls(spec.toy_weight)

    def regularize(self, loss, p):
        return loss, self.weight * p.output(p.first).float().mean() ** 2

    def after_step(self):
        self.steps += 1


def test_a_new_row_is_a_term_of_the_loss_logged_under_its_name(tiny_model, monkeypatch):
    monkeypatch.setitem(REGULARIZERS, "toy", Regularizer("toy", "the toy term", Toy, (
        Flag("toy_weight", 0.0, "nonneg_float", "the toy term"),), dict.fromkeys(("classifier", "multitask"),
                                                                             (0.0, Chosen("not measured")))))
    model = sentiment_model(tiny_model, 0.0)
    plain, toy = ClassificationLoss(), ClassificationLoss(toy=Toy(3.0))
    batch = sentiment_batch()
    with_toy = toy(model, batch)
    logits = model.logits(batch)
    torch.testing.assert_close(with_toy, plain(model, batch) + 3.0 * logits.mean() ** 2)
    assert toy.pop_terms().keys() == {"task", "toy"} and toy.on == ["toy"]
    toy.after_step()
    assert toy.toy.steps == 1
    with pytest.raises(TypeError, match="unknown regulariser"):
        TermLoss(tou=Toy(1.0))


def test_the_terms_come_in_the_tables_order_each_only_when_its_weight_is_above_0(tiny_model):
    model = sentiment_model(tiny_model, 0.1)
    assert list(REGULARIZERS)[:3] == ["rdrop", "smart", "bregman"]  # the order the loss adds them in
    spec = Regularizers(smart_bregman_weight=0.5, rdrop_weight=1.0)
    assert regularizer_weights(spec) == {"rdrop": 1.0, "bregman": 0.5} and regularizer_weights(None) == {}
    loss = ClassificationLoss(**TermLoss.regularizers(spec, model, 10))
    assert loss.on == ["rdrop", "bregman"] and loss.smart is None
    loss(model, sentiment_batch())
    assert list(loss.pop_terms()) == ["task", "rdrop", "bregman"]
    assert set(loss.state_dict()) == {"bregman.teacher_" + str(i) for i in range(len(loss.bregman.params))} | {
        "bregman.updates"}  # what --resume saves, named as before the table


def test_the_parsers_declare_every_rows_flags_with_the_settings_defaults_and_each_pipelines_weight():
    fields = {f.name: f.default for f in dataclasses.fields(Regularizers)}
    parsers = {"classifier": classifier_parser(), "multitask": multitask_parser()}
    actions = {name: {a.dest: a for a in ap._actions} for name, ap in parsers.items()}
    for r in REGULARIZERS.values():
        assert r.flags[0].dest == r.weight and set(r.defaults) == {"classifier", "multitask"}
        assert all(type(source).__name__ in ("Measured", "Paper", "Handout", "Chosen")
                   for _, source in r.defaults.values())  # each weight says where it comes from
        for f in r.flags:
            assert fields[f.dest] == f.default  # the settings field takes the flag's default: one place
            if f is r.flags[0]:
                assert actions["multitask"][f.dest].default == r.defaults["multitask"][0]
                assert actions["classifier"][f.dest].default is None  # resolved once the mode is known
                # the table of defaults (flags/defaults.py) takes the row's weights: Part 1's for full-model
                assert value(f.dest, P1, None, mode="full-model") == r.defaults["classifier"][0]
                assert value(f.dest, P2, None) == r.defaults["multitask"][0]
                assert handout(P1)[f.dest] == 0.0 and handout(P2)[f.dest] == 0.0
            else:
                assert all(a[f.dest].default == f.default for a in actions.values())


def _code_words(path):
    """The identifiers, attribute names and string constants of a module, docstrings and comments left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            words.add(n.id)
        elif isinstance(n, ast.Attribute):
            words.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            words.update(n.value.replace("-", " ").replace(".", " ").split())
    return words


def test_no_code_but_its_module_and_its_row_names_a_regulariser():
    """A regulariser's name and its flags appear in the code of its own module and of the table only (a new
    regulariser is its module plus one row)."""
    table = ROOT / "minbert" / "objectives" / "regularizers.py"
    files = [*ROOT.glob("*.py"), *(ROOT / "minbert").rglob("*.py"), *(ROOT / "gpt2").rglob("*.py"),
             *(ROOT / "tools").glob("*.py")]
    words = {p: _code_words(p) for p in files}
    for r in REGULARIZERS.values():
        own = {table, Path(inspect.getsourcefile(r.module))}
        names = {r.name, *(f.dest for f in r.flags), *(f"--{f.dest}" for f in r.flags)}
        found = sorted(str(p.relative_to(ROOT)) for p, w in words.items() if names & w and p not in own)
        assert not found, (r.name, found)
