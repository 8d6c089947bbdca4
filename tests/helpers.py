"""What the tests share: a tiny BERT checkpoint in HF's layout, tiny course data in the course's layouts, a local
HTTP server, each pipeline's argument builder. The fixtures that hand these to tests are in conftest.py."""
import hashlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import optuna
import pytest
import torch

from bert import BertModel
from config import BertConfig
from evaluation import write_dev_scores
from minbert.specs import ModelSpec
from minbert.tasks.sentiment import BertSentimentClassifier
from minbert.training.trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
WORDS = ("the a an movie film good bad great awful fun boring love hate is was it this that and but not "
         "very so funny sad plot actor acting story how what why do i can you my to of in on for with "
         "question answer same different dog cat man woman play playing run running ##s ##ing ##ed").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# The devices a test of a device path runs on: the CPU always, CUDA where a GPU is there (reported as skipped elsewhere).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"))]


def device_flags(device):
    """The pipelines' flags that put a run on `device`: --use_gpu for "cuda", none for the CPU."""
    return ["--use_gpu"] if device == "cuda" else []


def tiny_config(**kw):
    base = dict(vocab_size=len(SPECIALS) + len(WORDS) + 26 + 10, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=64, max_position_embeddings=512)
    return BertConfig(**{**base, **kw})


def write_vocab(path):
    letters = list("abcdefghijklmnopqrstuvwxyz")
    tokens = SPECIALS + WORDS + letters + [f"##{c}" for c in "aeiosnrtly"]
    Path(path).write_text("\n".join(tokens) + "\n")
    return path


def hf_name(ours):
    """Our parameter name -> the HF checkpoint name, written out by hand (independent of base_bert)."""
    simple = {"word_embedding": "embeddings.word_embeddings", "pos_embedding": "embeddings.position_embeddings",
              "tk_type_embedding": "embeddings.token_type_embeddings", "embed_layer_norm": "embeddings.LayerNorm",
              "pooler_dense": "pooler.dense"}
    layer = {"self_attention.query": "attention.self.query", "self_attention.key": "attention.self.key",
             "self_attention.value": "attention.self.value", "attention_dense": "attention.output.dense",
             "attention_layer_norm": "attention.output.LayerNorm", "interm_dense": "intermediate.dense",
             "out_dense": "output.dense", "out_layer_norm": "output.LayerNorm"}
    mod, leaf = ours.rsplit(".", 1)
    if mod in simple:
        name = simple[mod]
    else:
        _, i, rest = mod.split(".", 2)
        name = f"encoder.layer.{i}.{layer[rest]}"
    if "LayerNorm" in name:  # old TF-converted checkpoints say gamma/beta
        leaf = {"weight": "gamma", "bias": "beta"}[leaf]
    return f"bert.{name}.{leaf}"


def make_hf_checkpoint(folder, config=None, seed=0, fmt="safetensors", extra_heads=True):
    """A tiny random BERT saved as the HF hub lays it out: config.json, vocab.txt, weights with the
    'bert.' prefix, gamma/beta names and a pretraining head we must ignore. Returns (folder, model)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = config or tiny_config()
    torch.manual_seed(seed)
    model = BertModel(config).eval()
    with torch.no_grad():  # non-trivial LayerNorms and biases, so a mix-up would show
        for n, p in model.named_parameters():
            if "layer_norm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    sd = {hf_name(k): v.clone().contiguous() for k, v in model.state_dict().items()}
    if extra_heads:
        sd["cls.predictions.bias"] = torch.zeros(config.vocab_size)
        sd["bert.embeddings.position_ids"] = torch.arange(config.max_position_embeddings)[None]
    if fmt == "safetensors":
        from safetensors.torch import save_file
        save_file(sd, str(folder / "model.safetensors"))
    else:
        torch.save(sd, folder / "pytorch_model.bin")
    d = config.to_dict()
    d.update(architectures=["BertForPreTraining"], model_type="bert")
    (folder / "config.json").write_text(json.dumps(d))
    write_vocab(folder / "vocab.txt")
    return folder, model


class FileServer:
    """HTTP server on 127.0.0.1 serving a dict path -> bytes, with Range support and fault injection:
    `cut[path] = n` sends a full Content-Length but closes after n bytes; `etag[path]` is announced
    as X-Linked-Etag (the HF hub's sha256 of an LFS file)."""

    def __init__(self):
        self.files, self.cut, self.etag, self.log = {}, {}, {}, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                server.log.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng:
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                part = body[start:]
                self.send_header("Content-Length", str(len(part)))
                if self.path in server.etag:
                    self.send_header("X-Linked-Etag", f'"{server.etag[self.path]}"')
                self.end_headers()
                n = server.cut.pop(self.path, None)
                self.wfile.write(part if n is None else part[:n])
                self.wfile.flush()
                if n is not None:
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def add_folder(self, prefix, folder, sha=True):
        for f in Path(folder).iterdir():
            data = f.read_bytes()
            self.files[f"{prefix}/{f.name}"] = data
            if sha and f.suffix in (".safetensors", ".bin"):
                self.etag[f"{prefix}/{f.name}"] = hashlib.sha256(data).hexdigest()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def train_gpt2_vocab(folder, texts, vocab_size=400):
    """A byte-level BPE vocabulary (vocab.json, merges.txt) trained on `texts` with `tokenizers`, GPT-2's
    <|endoftext|> among its tokens: GPT-2's own vocabulary cannot be downloaded here."""
    from tokenizers import ByteLevelBPETokenizer
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"])
    Path(folder).mkdir(parents=True, exist_ok=True)
    tok.save_model(str(folder))
    return tok.get_vocab_size()


def make_gpt2_checkpoint(folder, seed=0, **shape):
    """An HF GPT2LMHeadModel with random weights, saved by transformers in HF's layout (config.json,
    model.safetensors) beside a vocabulary trained on sonnet-like lines; the folder. `shape` overrides the tiny
    default sizes (n_embd 32, 2 layers, 4 heads, 64 positions)."""
    from transformers import GPT2Config as HFConfig, GPT2LMHeadModel
    lines = [f"{w} {v} doth {u} the {w}'s fair {v}? Answer yes or no: {a}" for w in ("love", "time", "beauty", "thou")
             for v in ("rose", "summer", "night", "heart") for u in ("make", "bear", "see") for a in ("yes", "no")]
    vocab = train_gpt2_vocab(folder, lines * 3)
    torch.manual_seed(seed)
    config = HFConfig(**{**dict(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=4, eos_token_id=0,
                               bos_token_id=0), **shape})
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    return Path(folder)


def real_data_folder(name="sts-dev.csv"):
    """The folder of the course's data files (the CSVs; name="sonnets.txt" for the GPT-2 project's sonnets): data/ as
    setup.sh fills it, else ../shared/data beside the project (CI has one of them)."""
    folder = ROOT / "data" if (ROOT / "data" / name).exists() else SHARED_DATA
    assert (folder / name).exists(), f"no {name} in {ROOT / 'data'} or {SHARED_DATA}: run setup.sh"
    return folder


POS, NEG = "good great fun love funny".split(), "bad awful boring hate sad".split()
FILLER = "the movie film plot story acting actor is was it this and very so".split()


def _sentence(rng, label, n_labels):
    words = [rng.choice(FILLER) for _ in range(rng.randint(2, 9))]
    pool = POS if label >= n_labels / 2 else NEG
    for _ in range(1 + label % 2):
        words.insert(rng.randrange(len(words) + 1), rng.choice(pool))
    return " " + " ".join(words) + " ."


def write_course_data(folder, n_train=48, n_dev=16, n_test=12, seed=0):
    """Tiny files in the course's exact layouts: a leading index column with an empty name, the
    test-student files' two index columns, Quora's CRLF endings and 0.0/1.0 labels."""
    import random
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = iter(f"{rng.getrandbits(100):025x}" for _ in range(10 ** 6))
    for name, n_labels in (("ids-sst", 5), ("ids-cfimdb", 2)):
        for split, n in (("train", n_train), ("dev", n_dev)):
            rows = ["\tid\tsentence\tsentiment"]
            for i in range(n):
                y = rng.randrange(n_labels)
                rows.append(f"{i}\t{next(ids)}\t{_sentence(rng, y, n_labels)}\t{y}")
            (folder / f"{name}-{split}.csv").write_text("\n".join(rows) + "\n")
        rows = ["0\t\tid\tsentence"] + [f"{i + 1}\t{float(i)}\t{next(ids)}\t{_sentence(rng, rng.randrange(2), 2)}"
                                        for i in range(n_test)]
        (folder / f"{name}-test-student.csv").write_text("\n".join(rows) + "\n")
    for name, col, nl in (("quora", "is_duplicate", "\r\n"), ("sts", "similarity", "\n")):
        for split, n in (("train", n_train), ("dev", n_dev), ("test-student", n_test)):
            head = ["", "id", "sentence1", "sentence2"] + ([col] if split != "test-student" else [])
            rows = ["\t".join(head)]
            for i in range(n):
                y = rng.randrange(2)
                a = _sentence(rng, y, 2).strip()
                b = a if y else _sentence(rng, 1 - y, 2).strip()
                label = (f"{float(y)}" if name == "quora" else f"{rng.uniform(0, 2) + 3 * y:.1f}")
                rows.append("\t".join([str(i), next(ids), a, b] + ([label] if split != "test-student" else [])))
            (folder / f"{name}-{split}.csv").write_text(nl.join(rows) + nl)
    return folder


# ----------------------------------------------------------------------------- one argument builder per pipeline

# The flags naming a run's folder: the scripts refuse two of them, so a builder below adds its own only when
# `extra` names none.
FOLDER_FLAGS = ("--run_name", "--run_dir", "--checkpoint", "--checkpoint_dir")


def part1_args(tmp_path, data, model, *extra):
    """classifier.py's flags for a tiny run writing under tmp_path (run folder ck/ unless `extra` names one,
    predictions pred/)."""
    folder = [] if set(FOLDER_FLAGS) & set(extra) else ["--run_dir", str(tmp_path / "ck")]
    return ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
            *folder, "--predictions_dir", str(tmp_path / "pred"), *extra]


def part2_args(tmp_path, data, model, *extra):
    """multitask_classifier.py's flags for a tiny run writing under tmp_path: its run folder ck/ (best
    checkpoint ck/mt.pt) unless `extra` names one, the six published files and the results table in pred/. With
    --eval_only the re-scoring run gets its own folder, eval/ (or eval-2/, ... when one is there)."""
    out = [x for t in ("sst", "para", "sts") for s in ("dev", "test")
           for x in (f"--{t}_{s}_out", str(tmp_path / "pred" / f"{t}-{s}-output.csv"))]
    folder = ["--checkpoint", str(tmp_path / "ck" / "mt.pt")]
    if set(FOLDER_FLAGS) & set(extra):
        folder = []
    elif "--eval_only" in extra:
        n = 1
        while (tmp_path / f"eval{'' if n == 1 else f'-{n}'}").exists():
            n += 1
        folder = ["--run_dir", str(tmp_path / f"eval{'' if n == 1 else f'-{n}'}")]
    return ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
            "--fine-tune-mode", "full-model", "--lr", "1e-3", *folder,
            "--results", str(tmp_path / "pred" / "results.csv"), *out, *extra]


def eval_only_args(args, checkpoint, folder):
    """Part 2 flags `args` turned into a --eval_only re-scoring of `checkpoint` in its own run folder `folder`
    (the training run's --checkpoint dropped: that folder keeps the files it wrote)."""
    args = list(args)
    if "--checkpoint" in args:
        i = args.index("--checkpoint")
        del args[i:i + 2]
    return args + ["--run_dir", str(folder), "--eval_only", str(checkpoint)]


def pretrain_texts(tmp_path, n=120):
    """A --texts file of `n` six-word sentences of the tiny vocabulary."""
    words = "the a movie film good bad great awful fun boring love hate is was it this and but not very".split()
    g = torch.Generator().manual_seed(1)
    lines = [" ".join(words[i] for i in torch.randint(len(words), (6,), generator=g).tolist()) for _ in range(n)]
    path = Path(tmp_path) / "texts.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def pretrain_args(tmp_path, model, out, *extra):
    """pretrain.py's flags for a tiny run on pretrain_texts, writing its checkpoint folder to `out`."""
    return ["--pretrained", str(model), "--texts", str(pretrain_texts(tmp_path)), "--out", str(out),
            "--batch_size", "8", "--lr", "3e-3", "--max_length", "16", *extra]


def interrupt_second_epoch(monkeypatch):
    """Make Trainer.run_epoch raise KeyboardInterrupt on its second call (the machine goes away during the
    second epoch); returns a function that puts the real one back."""
    real, calls = Trainer.run_epoch, []

    def interrupted(self, *a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *a, **kw)
    monkeypatch.setattr(Trainer, "run_epoch", interrupted)
    return lambda: monkeypatch.setattr(Trainer, "run_epoch", real)


def epochs_run(monkeypatch):
    """Record each epoch Trainer.run_epoch trains from now on: a list of the epochs' names ("mt epoch 1", ...),
    so that a test sees which epochs a (resumed) run actually trained, not only what it wrote."""
    real, names = Trainer.run_epoch, []

    def recorded(self, batches, loss_fn, total, desc="train", **kw):
        names.append(desc)
        return real(self, batches, loss_fn, total, desc=desc, **kw)
    monkeypatch.setattr(Trainer, "run_epoch", recorded)
    return names


# ----------------------------------------------------------------------------- a PostgreSQL server of the test's own

def postgres_bin(name):
    import glob
    import shutil
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)
    return found


# ----------------------------------------------------------------------------- tiny models

SENTIMENT_IDS = torch.tensor([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3]])


def sentiment_model(tiny_model, dropout):
    """A Part 1 model of the tiny checkpoint in training mode, every dropout (BERT's and the head's) at `dropout`."""
    model = BertSentimentClassifier(ModelSpec(pipeline="classifier", pretrained=str(tiny_model), dropout=[dropout]))
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    return model.train()


def sentiment_batch():
    """Two rows of SENTIMENT_IDS with their padding mask and labels, as TaskData.batch builds them."""
    ids = SENTIMENT_IDS
    return {"x": {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": torch.zeros_like(ids)},
            "labels": torch.tensor([1, 3])}


def multitask_spec(model, mode="full-model", **kw):
    """A ModelSpec of the tiny checkpoint for MultitaskBERT: no head dropout, rank-4 adapters."""
    return ModelSpec(**{**dict(pretrained=str(model), fine_tune_mode=mode, dropout=[0.0] * 3, lora_rank=4,
                               lora_alpha=8.0), **kw})


def tiny_batch():
    """(input_ids, attention_mask, token_type_ids) of two 7-token rows of the tiny vocabulary."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 40, (2, 7), generator=g)
    return ids, torch.ones_like(ids), torch.zeros_like(ids)


def parameters_with_gradients(model):
    """The names of a MultitaskBERT's parameters that one backward pass through all three tasks reaches."""
    ids, mask, types = tiny_batch()
    (model.predict_sentiment(ids, mask).sum() + model.predict_paraphrase(ids, mask, token_type_ids=types).sum()
     + model.predict_similarity(ids, mask, token_type_ids=types).sum()).backward()
    return {n for n, p in model.named_parameters() if p.grad is not None}


def output_files(folder):
    """{name: text} of the Part 2 leaderboard files in `folder`."""
    return {p.name: p.read_text() for p in sorted(Path(folder).glob("*-output.csv"))}


def snapshot(folder):
    """{relative path: sha256} of every file under `folder`."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- a tiny run for report.py

def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


class FakeData:
    """The few TaskData fields write_dev_scores reads."""

    def __init__(self, ids, texts, labels):
        self.ids = ids
        self.examples = [SimpleNamespace(texts=t) for t in texts]
        self.scored = np.array([l is not None for l in labels])
        self.labels = torch.tensor([0 if l is None else float(l) for l in labels], dtype=torch.float64)

    def __len__(self):
        return len(self.ids)


def make_multitask_run(folder, name="tiny", means=(0.50, 0.62, 0.60), seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    with open(folder / "multitask.jsonl", "w") as fp:
        for e, m in enumerate(means):
            fp.write(json.dumps({"epoch": e, "train_loss": 2.0 - 0.3 * e, "seconds": 60.0, "run": name,
                                 "dev": {"sst": m - 0.1, "quora": m + 0.1, "sts": 2 * m - 1}, "dev_mean": m}) + "\n")
    n = 40
    sst_gold = rng.integers(0, 5, n)
    sst_logits = rng.normal(size=(n, 5)).astype(np.float32)
    sst_logits[np.arange(n), sst_gold] += 1.5 * (rng.random(n) < 0.6)
    write_dev_scores(folder / "sst-dev-scores.npz", "sst",
                     FakeData([f"s{i}" for i in range(n)], [(f"sentence {i}",) for i in range(n)], list(sst_gold)),
                     sst_logits, sst_logits.argmax(-1))
    q_gold = rng.integers(0, 2, n)
    q_logit = (rng.normal(size=n) + 2 * (q_gold - 0.5)).astype(np.float32)
    labels = [int(g) for g in q_gold]
    labels[3] = None  # a broken course row: predicted, not scored
    write_dev_scores(folder / "para-dev-scores.npz", "quora",
                     FakeData([f"q{i}" for i in range(n)], [(f"a {i}", f"b {i}") for i in range(n)], labels),
                     q_logit, (q_logit > 0).astype(int))
    s_gold = rng.uniform(0, 5, n)
    s_pred = np.clip(s_gold + rng.normal(scale=1.0, size=n), 0, 5)
    write_dev_scores(folder / "sts-dev-scores.npz", "sts",
                     FakeData([f"t{i}" for i in range(n)], [(f"x {i}", f"y {i}") for i in range(n)], list(s_gold)),
                     s_pred, s_pred)
    return folder, {"sst": (sst_gold, sst_logits.argmax(-1)), "sts": (s_gold, s_pred)}


# ----------------------------------------------------------------------------- sweeps

def sweep_base(course_data, tiny_model, epochs=1):
    """Part 1 flags of a tiny SST run, for the trials of a sweep."""
    return ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "sst",
            "--fine-tune-mode", "full-model", "--batch_size", "8", "--epochs", str(epochs), "--smart_weight", "0"]


def sweep_trials(tmp_path, study):
    """The Optuna trials of a study in the default SQLite storage under tmp_path."""
    return optuna.load_study(study_name=study, storage=f"sqlite:///{tmp_path / 'runs' / 'sweeps' / (study + '.db')}").trials


def _ctrl_c_reaches_python():
    # A job that a non-interactive shell starts in the background (`pytest ... &` in a script, as CI or nohup
    # may) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the sweep would
    # never see the test's Ctrl-C. A user's terminal gives the default disposition, as this does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_sweep(tmp_path, argv):
    """sweep.py started as a process group of its own, Ctrl-C reaching it as it does from a terminal."""
    return subprocess.Popen([sys.executable, str(ROOT / "sweep.py"), *argv], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_ctrl_c_reaches_python)


def child_pids(pid):
    """The pids of `pid`'s child processes (Linux: /proc/PID/task/*/children)."""
    pids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that ended between the listing and the read
            pass
    return pids


def freeze_first_trial(proc):
    """Wait until the sweep `proc` runs its first trial, then freeze that trial's process (SIGSTOP) and return
    its pid and the sweep's output so far. The sweep itself keeps running (its heartbeat goes on), so to other
    workers the trial is simply running, however long they take; SIGCONT lets it finish."""
    out = []
    for line in proc.stdout:
        out.append(line)
        if re.match(r"trial \d+: --", line):
            break
    trial = []
    while not trial:  # the trial's process is started right after its line
        assert proc.poll() is None, "the sweep ended before its first trial's process started:\n" + "".join(out)
        trial = child_pids(proc.pid)
        time.sleep(0.05)
    os.kill(trial[0], signal.SIGSTOP)
    return trial[0], out


def stop_during_trial(proc, study_folder, number, sig):
    """Send `sig` to the sweep while trial `number`'s process is provably mid-run; returns its output.

    Nothing here waits on a clock: the trial's first epoch line in its log says it is training, and the
    trial's process is then frozen (SIGSTOP) so that it cannot finish before the signal lands, however
    busy the machine. It is let go (SIGCONT) once the signal is sent."""
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith(f"trial {number}: --"):
            break
    logged = lambda: [p for p in study_folder.glob(f"t{number}-s*/*-log.jsonl") if p.read_text().strip()]  # noqa: E731
    while not logged():
        assert proc.poll() is None, "the sweep ended before trial %d logged an epoch" % number
        time.sleep(0.02)
    trial = child_pids(proc.pid)
    assert len(trial) == 1, f"expected the trial's one process under the sweep, found {trial}"
    os.kill(trial[0], signal.SIGSTOP)
    try:
        os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
    finally:
        try:
            os.kill(trial[0], signal.SIGCONT)
        except ProcessLookupError:
            pass
    rest, err = proc.communicate(timeout=600)
    return "".join(out) + rest, err


# ----------------------------------------------------------------------------- running a command

def cli(script, *args, cwd=ROOT):
    """Run one of the project's commands (`script`, relative to the project folder) as a user would."""
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=cwd, capture_output=True, text=True)


def one_line_error(out, pattern):
    """The command failed with exit code 2 and one stderr line matching `pattern`, no traceback."""
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and re.search(pattern, err[0]), out.stderr
