"""gpt2/paraphrase_detection.py: the command, run from the gpt2 folder, trains the cloze model and writes the
handout's two files with every Quora id."""

import pytest

from minbert.course_data import data_file, read_examples
from tests.course import ROOT
from tests.processes import run_main
from utils import MinbertError


def test_the_command_writes_both_files_with_every_id(tmp_path, course_data, tiny_gpt2):
    out = run_main("gpt2/paraphrase_detection.py", "--pretrained", str(tiny_gpt2), "--data_dir", str(course_data),
                   "--epochs", "2", "--lr", "1e-3", "--run_dir", str(tmp_path / "run"), "--predictions_dir",
                   str(tmp_path / "pred"), cwd=ROOT / "gpt2")
    assert out.returncode == 0, out.stderr[-3000:]
    for split in ("dev", "test"):
        lines = (tmp_path / "pred" / f"para-{split}-output.csv").read_text().splitlines()
        ids = [e.id for e in read_examples(data_file(course_data, "quora", split), "quora", split)]
        assert lines[0] == "id , Predicted_Is_Paraphrase" and [l.split(" , ")[0] for l in lines[1:]] == ids
        assert {l.split(" , ")[1] for l in lines[1:]} <= {"0", "1"}
    assert (tmp_path / "run" / "para.pt").is_file()


def test_the_handouts_output_flags_name_the_two_files(tmp_path, course_data, tiny_gpt2):
    """--para_dev_out and --para_test_out, the handout's flags: each file is copied where its flag says (one
    given, the other still goes to --predictions_dir); one already there that no run wrote stops the run first."""
    from gpt2 import paraphrase_detection
    args = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data), "--epochs", "1", "--run_dir",
            str(tmp_path / "run"), "--predictions_dir", str(tmp_path / "pred")]
    paraphrase_detection.main(args + ["--para_dev_out", str(tmp_path / "mine" / "dev.csv")])
    assert (tmp_path / "mine" / "dev.csv").read_bytes() == (tmp_path / "run" / "para-dev-output.csv").read_bytes()
    published = sorted(p.name for p in (tmp_path / "pred").iterdir() if not p.name.startswith("."))
    assert published == ["para-test-output.csv"]
    (tmp_path / "theirs.csv").write_text("a file of the user's\n")
    with pytest.raises(MinbertError, match=r"--para_test_out .*theirs.csv: "):
        paraphrase_detection.main(args[:-4] + ["--run_dir", str(tmp_path / "run2"), "--predictions_dir",
                                               str(tmp_path / "pred2"), "--para_test_out",
                                               str(tmp_path / "theirs.csv")])
    assert (tmp_path / "theirs.csv").read_text() == "a file of the user's\n"


def test_a_max_length_too_short_for_the_prompt_is_refused_and_cut_prompts_are_counted(tmp_path, course_data, tiny_gpt2,
                                                                                       capsys):
    """--max_length 3 would keep three tokens of the template and never the questions nor the answer cue: refused
    before training, naming the template's length; a length some prompts reach says how many."""
    import re
    from gpt2 import paraphrase_detection
    from gpt2.paraphrase import PROMPT
    from gpt2.tokenizer import GPT2Tokenizer
    template = len(GPT2Tokenizer.from_pretrained(tiny_gpt2).encode(PROMPT.format("", "")))
    args = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data), "--epochs", "1", "--run_dir",
            str(tmp_path / "run"), "--predictions_dir", str(tmp_path / "pred")]
    with pytest.raises(MinbertError, match=rf"^--max_length 3: the cloze prompt alone takes {template} tokens .*give "
                                           rf"at least {template + 2}"):
        paraphrase_detection.main(args + ["--max_length", "3"])
    with pytest.raises(MinbertError, match=rf"^--max_length {template + 1}: the cloze prompt alone"):  # the other side
        paraphrase_detection.main(args + ["--max_length", str(template + 1)])
    assert not (tmp_path / "run").exists()
    paraphrase_detection.main(args + ["--max_length", str(template + 2)])
    assert re.search(rf"quora train: \d+ of \d+ prompts reach --max_length {template + 2}", capsys.readouterr().out)
