"""sonnet_generation.py's run on minbert's shared epoch protocol (training/fit.py): the sonnets as a dataset
of texts, the LM loss, dev perplexity as the score, and at the end the completions of the held-out sonnets,
their chrF against the true dev sonnets, in a run folder of its own (--resume continues it)."""
from pathlib import Path

import sacrebleu
import torch

from datasets import set_pad_multiple
from gpt2.sonnets import (LanguageModelLoss, SonnetGPT, check_prompts, check_true_dev, complete, perplexity,
                          read_sonnets, write_sonnets)
from gpt2.tokenizer import GPT2Tokenizer
from minbert.cli import main_print
from minbert.files import require_file
from minbert.pipelines.pretrain import as_data
from minbert.runs.folders import open_run
from minbert.runs.outputs import check_outputs
from minbert.training.fit import Pipeline, fit
from minbert.training.trainer import build_trainer
from utils import maybe_compile, seed_everything


def sonnet_inputs(settings):
    """{what: path} of the four sonnet files a run reads."""
    s = settings
    return {"sonnets": s.sonnet_path, "held-out sonnets": s.held_out_sonnet_path,
            "held-out dev sonnets": s.held_out_dev_path, "true dev sonnets": s.true_dev_path}


class SonnetPipeline(Pipeline):
    kind, score_name = "gpt2-sonnet", "negative dev perplexity"

    def __init__(self, settings):
        s, rt = settings, settings.runtime
        self.settings, self.device, self.amp = s, rt.device, rt.amp
        self.tokenizer = GPT2Tokenizer.from_pretrained(s.model.pretrained, log=main_print)
        self.train = as_data([t for _, t in read_sonnets(s.sonnet_path)], self.tokenizer, s.model.max_length)
        self.dev = as_data([t for _, t in read_sonnets(s.true_dev_path)], self.tokenizer, s.model.max_length)
        set_pad_multiple({"train": self.train, "dev": self.dev}, rt.pad_multiple)
        self.model = maybe_compile(SonnetGPT(s.model.pretrained, rt.attn).to(rt.device), rt.compile)
        limit = self.model.gpt.config.max_position_embeddings
        both = [(n, text, f"{flag} {path}")
                for flag, path in (("--held_out_sonnet_path", s.held_out_sonnet_path),
                                   ("--held_out_dev_path", s.held_out_dev_path))
                for n, text in read_sonnets(path)]
        check_prompts(both, None, self.tokenizer, limit, s.max_line_tokens,
                      s.no_repeat_ngram_size if s.decoding == "beam" else 0)
        check_true_dev(s.held_out_dev_path, s.true_dev_path)
        self.spec, self.loss = s.model, LanguageModelLoss()
        self.file_stem = "sonnet"
        self.inputs = sonnet_inputs(s)
        self.steps = -(-len(self.train) // s.batch_size)

    def batches(self, epoch):
        s = self.settings
        return self.train.batches(s.batch_size, True, s.recipe.seed * 1000 + epoch, s.bucket), self.steps, {}

    def evaluate(self):
        ppl = perplexity(self.model, self.dev, self.device, self.amp)
        return {"perplexity": ppl}, -ppl

    def describe(self, m):
        return f"dev perplexity {m['perplexity']:.2f}"

    def completions(self, path, seed):
        """Each sonnet of `path` (its first lines) completed to 14 lines as --decoding says, with one
        generator seeded once."""
        s, g = self.settings, torch.Generator(device=self.device).manual_seed(seed)
        temperature = 0.0 if s.decoding == "greedy" else s.temperature
        beams = s.num_beams if s.decoding == "beam" else 0
        return [(n, complete(self.model, self.tokenizer, text, temperature, s.top_p, s.max_line_tokens, g,
                             self.device, beams, s.length_penalty, s.no_repeat_ngram_size, s.early_stopping))
                for n, text in read_sonnets(path)]

    def write_outputs(self, files, best):
        s = self.settings
        dev = self.completions(s.held_out_dev_path, s.recipe.seed)
        true = dict(read_sonnets(s.true_dev_path))
        missing = [n for n, _ in dev if n not in true]
        chrf = dev_chrf(dev, true)
        write_sonnets(files.folder / "generated_sonnets_dev.txt", dev)
        held_out = self.completions(s.held_out_sonnet_path, s.recipe.seed + 1)
        test = write_sonnets(files.folder / "generated_sonnets.txt", held_out)
        ppl = best["scores"]["perplexity"]  # the reloaded best epoch's, as evaluate() measured it
        print(f"sonnets: best epoch {best['epoch']}, dev perplexity {ppl:.2f}, dev chrF {chrf:.2f} "
              f"({len(dev)} completions" + (f"; {len(missing)} without a true sonnet" if missing else "") +
              f"); run folder {files.folder}")
        result = {"dev_perplexity": ppl, "dev_chrf": chrf, "best_epoch": best["epoch"]}
        return result, [(test, Path(s.sonnet_out))]


def dev_chrf(completions, true):
    """chrF of completions [(number, text)] against the true sonnets {number: text} (sacrebleu's, as the
    course scores them; a completion without its true sonnet counts against the empty text)."""
    references = [[true.get(n, "") for n, _ in completions]]
    return sacrebleu.corpus_chrf([t for _, t in completions], references).score


def run_sonnets(settings, on_epoch=None):
    """sonnet_generation.py: a run folder, the inputs checked, training, then the completions."""
    s = settings
    for flag, path in (("--sonnet_path", s.sonnet_path), ("--held_out_sonnet_path", s.held_out_sonnet_path),
                       ("--held_out_dev_path", s.held_out_dev_path), ("--true_dev_path", s.true_dev_path)):
        require_file(path, f"{flag} {path}", "sonnets file")
    with open_run("gpt2-sonnet", ["sonnet"], s.run.name, s.run.dir, s.run.resume) as run:
        check_outputs(files=[("--sonnet_out", s.sonnet_out)],
                      inputs=[(f"the {k} file", v) for k, v in sonnet_inputs(s).items()], own=run.folder,
                      backup=s.run.backup)
        seed_everything(s.recipe.seed)
        pipeline = SonnetPipeline(s)
        trainer = build_trainer(pipeline.model, pipeline.loss, s.recipe, s.runtime, pipeline.steps,
                                train_data=pipeline.train, rows=s.batch_size)
        main_print(f"sonnets: {len(pipeline.train)} for training, "
                   f"{len(pipeline.dev)} true dev sonnets; run folder {run.folder}")
        return fit(pipeline, trainer, run, s, on_epoch)
