"""bench/run.py: the rows bench.py times follow its flags (the recipe's row only with a regulariser, every switch off
with --compare, HF's rows with --hf, its best alone with --hf best, HF in our reduced precision only where there is one)."""
from minbert.bench.run import rows
from minbert.objectives.regularizers import Regularizers
from minbert.specs import BenchSettings, Runtime


def test_the_rows_follow_the_flags():
    def labels(**kw):
        reg = Regularizers(rdrop_weight=kw.pop("rdrop", 0.0))
        return [label for label, _ in rows(BenchSettings(runtime=Runtime(amp=kw.pop("amp", "none")), regularizers=reg,
                                                         **kw))]
    assert labels() == ["plain"]
    assert labels(rdrop=2.0, compare=True) == ["recipe", "plain", "baseline"]
    assert labels(hf="all") == ["plain", "hf-bucketed", "hf-random"]
    assert labels(hf="all", amp="bf16") == ["plain", "hf-bucketed", "hf-random", "hf-amp"]
    assert dict(rows(BenchSettings(runtime=Runtime(amp="bf16"), hf="all")))["hf-amp"]["amp"] == "bf16"
    assert labels(hf="best") == ["plain", "hf-bucketed"]  # --hf best: HF's fastest setting for the device alone
    assert labels(hf="best", amp="bf16") == ["plain", "hf-amp"]


def test_with_record_step_on_a_gpu_the_rows_are_the_recorded_steps_with_the_eager_one_and_hf_compiled_beside_them():
    import torch
    s = BenchSettings(runtime=Runtime(device=torch.device("cuda"), amp="bf16", record_step=True), hf="all",
                      regularizers=Regularizers(rdrop_weight=2.0))
    got = dict(rows(s))
    assert list(got) == ["recipe", "plain", "eager", "hf-bucketed", "hf-random", "hf-amp", "hf-compiled"]
    assert got["recipe"]["record_step"] and got["plain"]["record_step"] and not got["eager"]
    assert got["hf-compiled"] == dict(fast=False, bucket=True, hf=True, amp="bf16", compiled=True)
