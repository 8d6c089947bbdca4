"""gpt2/paraphrase_detection.py: the command, run from the gpt2 folder, trains the cloze model and writes the
handout's two files with every Quora id."""
import subprocess
import sys

from minbert.course_data import data_file, read_examples
from tests.helpers import ROOT


def test_the_command_writes_both_files_with_every_id(tmp_path, course_data, tiny_gpt2):
    out = subprocess.run([sys.executable, "paraphrase_detection.py", "--pretrained", str(tiny_gpt2), "--data_dir",
                          str(course_data), "--epochs", "2", "--lr", "1e-3", "--run_dir", str(tmp_path / "run"),
                          "--predictions_dir", str(tmp_path / "pred")], cwd=ROOT / "gpt2", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    for split in ("dev", "test"):
        lines = (tmp_path / "pred" / f"para-{split}-output.csv").read_text().splitlines()
        ids = [e.id for e in read_examples(data_file(course_data, "quora", split), "quora", split)]
        assert lines[0] == "id , Predicted_Is_Paraphrase" and [l.split(" , ")[0] for l in lines[1:]] == ids
        assert {l.split(" , ")[1] for l in lines[1:]} <= {"0", "1"}
    assert (tmp_path / "run" / "para.pt").is_file()
