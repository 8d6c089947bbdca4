"""bench/run.py: the rows bench.py times follow its flags (the recipe's row only with a regulariser, every switch off
with --compare, HF's rows with --hf, HF in our reduced precision only where there is one)."""
from minbert.bench.run import rows
from minbert.specs import BenchSettings, Regularizers, Runtime


def test_the_rows_follow_the_flags():
    def labels(**kw):
        reg = Regularizers(rdrop_weight=kw.pop("rdrop", 0.0))
        return [label for label, _ in rows(BenchSettings(runtime=Runtime(amp=kw.pop("amp", "none")), regularizers=reg,
                                                         **kw))]
    assert labels() == ["plain"]
    assert labels(rdrop=2.0, compare=True) == ["recipe", "plain", "baseline"]
    assert labels(hf=True) == ["plain", "hf-bucketed", "hf-random"]
    assert labels(hf=True, amp="bf16") == ["plain", "hf-bucketed", "hf-random", "hf-amp"]
    assert dict(rows(BenchSettings(runtime=Runtime(amp="bf16"), hf=True)))["hf-amp"]["amp"] == "bf16"
