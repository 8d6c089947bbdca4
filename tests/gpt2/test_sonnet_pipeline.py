"""gpt2/sonnet_pipeline.py: training lowers the dev perplexity's score path; the run writes the completions of
every held-out sonnet and scores the dev ones with chrF; bad paths are one line."""
import pytest

from gpt2.sonnet_pipeline import run_sonnets
from gpt2.sonnets import read_sonnets
from tests.helpers import make_gpt2_checkpoint, real_data_folder
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
    return ["--pretrained", str(model), "--sonnet_path", str(files / "sonnets.txt"),
            "--held_out_sonnet_path", str(files / "sonnets_held_out.txt"),
            "--held_out_dev_path", str(files / "sonnets_held_out_dev.txt"),
            "--true_dev_path", str(files / "TRUE_sonnets_held_out_dev.txt"), "--epochs", "1", "--lr", "1e-3",
            "--max_line_tokens", "6", "--run_dir", str(tmp_path / "run"),
            "--sonnet_out", str(tmp_path / "pred" / "generated_sonnets.txt"), *extra]


def test_a_missing_sonnets_file_is_one_line(tmp_path):
    from gpt2.flags import sonnet_parser, sonnet_settings
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    (files / "sonnets_held_out.txt").unlink()
    with pytest.raises(MinbertError, match="--held_out_sonnet_path .*sonnets_held_out.txt: sonnets file not found"):
        run_sonnets(sonnet_settings(sonnet_parser().parse_args(sonnet_argv(tmp_path, model, files))))
