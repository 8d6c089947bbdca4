"""tools/compare_speed.py: every row is timed and the two-run row's interval is the library's."""
import numpy as np

from minbert.reports.significance import combine, paired
from tools import compare_speed


def test_the_rows_are_timed_and_compute_what_report_py_computes(tmp_path):
    r = compare_speed.main(["--examples", "60", "--resamples", "200", "--repeats", "1", "--scipy",
                            "--json", str(tmp_path / "s.json")])
    assert len(r["rows"]) == 3 and all(x["seconds"] > 0 for x in r["rows"].values())
    rng = np.random.default_rng(0)
    a, b = compare_speed.system(60, 0.80, rng), compare_speed.system(60, 0.82, rng)
    g = np.random.default_rng(0)
    parts = {t: paired(m, x, b[t][1], 200, g) for t, (m, x) in a.items()}
    mean = combine([(1 / 3, parts["sst"]), (1 / 3, parts["quora"]), (1 / 6, parts["sts"])])
    (two_runs,) = [x for name, x in r["rows"].items() if name.startswith("two runs")]
    assert tuple(two_runs["mean_interval"]) == mean.interval()
    assert (tmp_path / "s.json").is_file()
