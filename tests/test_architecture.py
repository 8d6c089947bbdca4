"""TODO"""
import ast
import importlib

from tests.helpers import ROOT


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


def test_no_library_module_imports_a_pipeline_script():
    scripts = {"classifier", "multitask_classifier", "pretrain"}
    for path in [*ROOT.glob("*.py"), *(ROOT / "tools").glob("*.py")]:
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & scripts, f"{path.name} imports {sorted(imported & scripts)}"
