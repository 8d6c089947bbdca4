"""gpt2/sonnet_pipeline.py: training lowers the dev perplexity's score path; the run writes the completions of
every held-out sonnet and scores the dev ones with chrF; --decoding picks how they are written; bad paths are one
line."""
import re

import pytest

from gpt2.sonnet_pipeline import run_sonnets
from gpt2.sonnets import read_sonnets
from minbert.flags.typed import parse_flags
from tests.checkpoints import make_gpt2_checkpoint
from tests.course import FOLDER_FLAGS, overridden, real_data_folder
from utils import MinbertError


def sonnet_files(folder, n_train=6, n_held=2):
    """Small copies of the course's sonnet files (the first sonnets of each), in their own format."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {"sonnets.txt": n_train, "sonnets_held_out.txt": n_held, "sonnets_held_out_dev.txt": n_held,
             "TRUE_sonnets_held_out_dev.txt": n_held}
    for name, n in names.items():
        sonnets = read_sonnets(real_data_folder(name) / name)[:n]
        (folder / name).write_text("Sonnets\n\n\n" + "".join(f"\n{k}\n\n{t}\n" for k, t in sonnets))
    return folder


def sonnet_argv(tmp_path, model, files, *extra):
    """sonnet_generation.py's flags for a tiny run (run folder run/ unless `extra` names one)."""
    folder = [] if set(FOLDER_FLAGS) & set(extra) else ["--run_dir", str(tmp_path / "run")]
    return overridden(["--pretrained", str(model), "--sonnet_path", str(files / "sonnets.txt"),
                       "--held_out_sonnet_path", str(files / "sonnets_held_out.txt"),
                       "--held_out_dev_path", str(files / "sonnets_held_out_dev.txt"),
                       "--true_dev_path", str(files / "TRUE_sonnets_held_out_dev.txt"), "--epochs", "1", "--lr",
                       "1e-3", "--max_line_tokens", "6", *folder,
                       "--sonnet_out", str(tmp_path / "pred" / "generated_sonnets.txt")], extra)


def test_a_missing_sonnets_file_is_one_line(tmp_path):
    from gpt2.flags import sonnet_parser, sonnet_settings
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    (files / "sonnets_held_out.txt").unlink()
    with pytest.raises(MinbertError, match="--held_out_sonnet_path .*sonnets_held_out.txt: sonnets file not found"):
        run_sonnets(sonnet_settings(parse_flags(sonnet_parser(), sonnet_argv(tmp_path, model, files))))


def test_whole_held_out_sonnets_or_a_model_too_short_for_them_are_refused_before_training(tmp_path):
    """A held-out file of whole 14-line sonnets has nothing to complete; a model whose positions cannot hold a prompt
    and 11 lines of --max_line_tokens would write short sonnets that the submission refuses: both are one line
    before the first epoch, the second naming the --max_line_tokens that fits."""
    from gpt2.flags import sonnet_parser, sonnet_settings
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    whole = sonnet_argv(tmp_path, model, files, "--held_out_sonnet_path", str(files / "TRUE_sonnets_held_out_dev.txt"))
    with pytest.raises(MinbertError, match=r"--held_out_sonnet_path .*TRUE_sonnets_held_out_dev.txt: sonnet \d+ has 14 "
                                           r"lines already, so nothing is left to complete"):
        run_sonnets(sonnet_settings(parse_flags(sonnet_parser(), whole)))
    short = make_gpt2_checkpoint(tmp_path / "short", n_positions=200)
    argv = sonnet_argv(tmp_path, short, files, "--max_line_tokens", "24")
    with pytest.raises(MinbertError, match=r"--max_line_tokens 24: sonnet \d+ of --held_out_(sonnet|dev)_path .* fit the "
                                           r"model's 200 positions only at up to \d+ tokens a line: give --max_line_tokens"):
        run_sonnets(sonnet_settings(parse_flags(sonnet_parser(), argv)))
    assert not (tmp_path / "run" / "sonnet.pt").exists() and not (tmp_path / "pred").exists()


@pytest.mark.parametrize("name, what", [("sonnet.pt", "this run's checkpoint"), ("sonnet-log.jsonl", "this run's log"),
                                        (".minbert-run", "this run's folder's mark")])
def test_an_output_at_a_file_the_run_keeps_is_refused_before_training(tmp_path, name, what):
    """--sonnet_out at the run's own checkpoint had replaced it with the sonnets after training (the checkpoint
    kept as a backup nobody asked for); its log and its folder's mark likewise."""
    from gpt2.flags import sonnet_parser, sonnet_settings
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    argv = sonnet_argv(tmp_path, model, files, "--sonnet_out", str(tmp_path / "run" / name))
    with pytest.raises(MinbertError, match=rf"^--sonnet_out .*run/{re.escape(name)}: is {what}, which this run reads; "):
        run_sonnets(sonnet_settings(parse_flags(sonnet_parser(), argv)))
    assert not (tmp_path / "run").exists()


def test_a_finished_run_resumes_from_moved_sonnet_files_but_not_into_another_sonnet_out(tmp_path):
    """The four sonnet paths (the inputs, compared by their bytes) do not define the run, so --resume takes them
    moved; a finished run is neither completed again nor published under another --sonnet_out (one line)."""
    import shutil
    from gpt2 import sonnet_generation
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    sonnet_generation.main(sonnet_argv(tmp_path, model, files))
    written = (tmp_path / "pred" / "generated_sonnets.txt").read_bytes()
    moved = shutil.move(files, tmp_path / "moved")
    sonnet_generation.main(sonnet_argv(tmp_path, model, moved, "--resume"))
    assert (tmp_path / "pred" / "generated_sonnets.txt").read_bytes() == written
    argv = sonnet_argv(tmp_path, model, moved, "--resume")
    argv[argv.index("--sonnet_out") + 1] = str(tmp_path / "elsewhere" / "generated_sonnets.txt")
    with pytest.raises(MinbertError, match="nor publishes it under other paths"):
        sonnet_generation.main(argv)
    assert not (tmp_path / "elsewhere").exists()


def test_decoding_picks_how_the_completions_are_written(tmp_path):
    """--decoding greedy and beam (with its beams, length penalty and n-gram blocking) reach every completion."""
    from gpt2.flags import parse_sonnets, sonnet_settings
    from gpt2.sonnet_pipeline import SonnetPipeline
    from gpt2.sonnets import complete
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    held = files / "sonnets_held_out_dev.txt"
    prompts = read_sonnets(held)
    for flags, kw in ((["--decoding", "greedy"], dict(temperature=0.0)),
                      (["--decoding", "beam", "--num_beams", "3", "--length_penalty", "0.5",
                        "--no_repeat_ngram_size", "2"], dict(num_beams=3, length_penalty=0.5, no_repeat_ngram_size=2))):
        pipeline = SonnetPipeline(sonnet_settings(parse_sonnets(sonnet_argv(tmp_path, model, files, *flags))))
        expected = [(n, complete(pipeline.model, pipeline.tokenizer, text, max_line_tokens=6, **kw)) for n, text in prompts]
        assert pipeline.completions(held, 0) == expected


def test_an_ngram_longer_than_any_sonnet_written_is_refused_before_training(tmp_path):
    """--no_repeat_ngram_size beyond the longest sonnet the run can write (its first lines and the rest at up to
    --max_line_tokens a line, within the model's positions) would never act: one line, nothing trained; the
    longest that can act is taken."""
    from gpt2.sonnets import LINES, check_prompts, read_sonnets
    from gpt2.tokenizer import GPT2Tokenizer
    from gpt2 import sonnet_generation
    from tests.checkpoints import make_gpt2_checkpoint
    tiny_gpt2 = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    prompts = read_sonnets(files / "sonnets_held_out.txt") + read_sonnets(files / "sonnets_held_out_dev.txt")
    tok = GPT2Tokenizer.from_pretrained(tiny_gpt2)
    longest = max(min(512, len(tok.encode(p.rstrip("\n") + "\n")) + (LINES - p.rstrip("\n").count("\n") - 1) * 6)
                  for _, p in prompts)
    check_prompts(prompts, "x", tok, 512, 6, longest)
    with pytest.raises(MinbertError, match=rf"--no_repeat_ngram_size {longest + 1}: longer than any sonnet this run "
                                           rf"writes \(at most {longest} tokens"):
        check_prompts(prompts, "x", tok, 512, 6, longest + 1)
    with pytest.raises(MinbertError, match=r"--no_repeat_ngram_size 100000: longer than any sonnet"):
        sonnet_generation.main(sonnet_argv(tmp_path, tiny_gpt2, files, "--decoding", "beam", "--no_repeat_ngram_size",
                                           "100000"))
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").glob("*.pt"))
