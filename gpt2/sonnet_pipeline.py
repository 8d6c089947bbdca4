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
    return {"sonnets": settings.sonnet_path, "held-out sonnets": settings.held_out_sonnet_path,
            "held-out dev sonnets": settings.held_out_dev_path, "true dev sonnets": settings.true_dev_path}


class SonnetPipeline(Pipeline):
    kind, score_name = "gpt2-sonnet", "negative dev perplexity"

    def __init__(self, settings):
        runtime = settings.runtime
        self.settings, self.device, self.amp = settings, runtime.device, runtime.amp
        self.tokenizer = GPT2Tokenizer.from_pretrained(settings.model.pretrained, log=main_print)
        length = settings.model.max_length
        self.train = as_data([t for _, t in read_sonnets(settings.sonnet_path)], self.tokenizer, length)
        self.dev = as_data([t for _, t in read_sonnets(settings.true_dev_path)], self.tokenizer, length)
        set_pad_multiple({"train": self.train, "dev": self.dev}, runtime.pad_multiple)
        self.model = maybe_compile(SonnetGPT(settings.model.pretrained, runtime.attn).to(runtime.device),
                                   runtime.compile)
        limit = self.model.gpt.config.max_position_embeddings
        both = [(n, text, f"{flag} {path}")
                for flag, path in (("--held_out_sonnet_path", settings.held_out_sonnet_path),
                                   ("--held_out_dev_path", settings.held_out_dev_path))
                for n, text in read_sonnets(path)]
        check_prompts(both, None, self.tokenizer, limit, settings.max_line_tokens,
                      settings.no_repeat_ngram_size if settings.decoding == "beam" else 0)
        check_true_dev(settings.held_out_dev_path, settings.true_dev_path)
        self.spec, self.loss = settings.model, LanguageModelLoss()
        self.file_stem = "sonnet"
        self.inputs = sonnet_inputs(settings)
        self.steps = -(-len(self.train) // settings.batch_size)

    def batches(self, epoch):
        settings = self.settings
        seed = settings.recipe.seed * 1000 + epoch
        return self.train.batches(settings.batch_size, True, seed, settings.bucket), self.steps, {}

    def evaluate(self):
        ppl = perplexity(self.model, self.dev, self.device, self.amp)
        return {"perplexity": ppl}, -ppl

    def describe(self, m):
        return f"dev perplexity {m['perplexity']:.2f}"

    def completions(self, path, seed):
        """Each sonnet of `path` (its first lines) completed to 14 lines as --decoding says, with one
        generator seeded once."""
        settings, g = self.settings, torch.Generator(device=self.device).manual_seed(seed)
        temperature = 0.0 if settings.decoding == "greedy" else settings.temperature
        beams = settings.num_beams if settings.decoding == "beam" else 0
        return [(n, complete(self.model, self.tokenizer, text, temperature, settings.top_p,
                             settings.max_line_tokens, g, self.device, beams, settings.length_penalty,
                             settings.no_repeat_ngram_size, settings.early_stopping))
                for n, text in read_sonnets(path)]

    def write_outputs(self, files, best):
        settings = self.settings
        dev = self.completions(settings.held_out_dev_path, settings.recipe.seed)
        true = dict(read_sonnets(settings.true_dev_path))
        missing = [n for n, _ in dev if n not in true]
        chrf = dev_chrf(dev, true)
        write_sonnets(files.folder / "generated_sonnets_dev.txt", dev)
        held_out = self.completions(settings.held_out_sonnet_path, settings.recipe.seed + 1)
        test = write_sonnets(files.folder / "generated_sonnets.txt", held_out)
        ppl = best["scores"]["perplexity"]  # the reloaded best epoch's, as evaluate() measured it
        print(f"sonnets: best epoch {best['epoch']}, dev perplexity {ppl:.2f}, dev chrF {chrf:.2f} "
              f"({len(dev)} completions" + (f"; {len(missing)} without a true sonnet" if missing else "") +
              f"); run folder {files.folder}")
        result = {"dev_perplexity": ppl, "dev_chrf": chrf, "best_epoch": best["epoch"]}
        return result, [(test, Path(settings.sonnet_out))]


def dev_chrf(completions, true):
    """chrF of completions [(number, text)] against the true sonnets {number: text} (sacrebleu's, as the
    course scores them; a completion without its true sonnet counts against the empty text)."""
    references = [[true.get(n, "") for n, _ in completions]]
    return sacrebleu.corpus_chrf([t for _, t in completions], references).score


def run_sonnets(settings, on_epoch=None):
    """sonnet_generation.py: a run folder, the inputs checked, training, then the completions."""
    for flag, path in (("--sonnet_path", settings.sonnet_path),
                       ("--held_out_sonnet_path", settings.held_out_sonnet_path),
                       ("--held_out_dev_path", settings.held_out_dev_path),
                       ("--true_dev_path", settings.true_dev_path)):
        require_file(path, f"{flag} {path}", "sonnets file")
    with open_run("gpt2-sonnet", ["sonnet"], settings.run.name, settings.run.dir, settings.run.resume) as run:
        check_outputs(files=[("--sonnet_out", settings.sonnet_out)],
                      inputs=[(f"the {k} file", v) for k, v in sonnet_inputs(settings).items()]
                      + run.files("sonnet").as_inputs(), own=run.folder,
                      backup=settings.run.backup, typed=settings.run.typed)
        seed_everything(settings.recipe.seed)
        pipeline = SonnetPipeline(settings)
        trainer = build_trainer(pipeline.model, pipeline.loss, settings.recipe, settings.runtime, pipeline.steps,
                                train_data=pipeline.train, rows=settings.batch_size)
        main_print(f"sonnets: {len(pipeline.train)} for training, "
                   f"{len(pipeline.dev)} true dev sonnets; {settings.recipe.lr_why}; run folder {run.folder}")
        return fit(pipeline, trainer, run, settings, on_epoch)
