"""The tokenizers the API encoders cut texts with, as the published runs did; apart from the
clients, as the one part that reads local files and imports tokenizer libraries.

``tokenizer=`` names a tokenizer.json file, a Hugging Face tokenizer folder, or a tiktoken encoding
name (tiktoken downloads it on first use, so offline it works only from TIKTOKEN_CACHE_DIR). An
existing path wins over a name.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Protocol

from r2med_tasks.plugin import UserError


def _reason(e: BaseException, limit: int = 200) -> str:
    """An exception as one short line, "Type: first line of its message"."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:limit]}" if first else type(e).__name__


class Tokenizer(Protocol):
    """What cuts a text: ``encode`` to token ids, ``decode`` back."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


_ENCODING_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
LOCAL_TOKENIZER = "a local tokenizer.json or a folder holding a Hugging Face tokenizer"


def tokenizer_kind(value: str) -> str:
    """How ``tokenizer=value`` is read: ``"file"``, ``"folder"``, ``"tiktoken"`` or ``"missing"``."""
    path = Path(value).expanduser()
    if path.is_file():
        return "file"
    if path.is_dir():
        return "folder"
    if _ENCODING_NAME.fullmatch(value) and not value.lower().endswith(".json"):
        return "tiktoken"
    return "missing"


def missing_tokenizer(value: str, where: str = "tokenizer") -> str:
    return (f"{where}={value}: no such file or folder; give {LOCAL_TOKENIZER}, "
            "or a tiktoken encoding name such as cl100k_base")


def load_tokenizer(value: str, *, hub_ok: bool = False) -> Tokenizer:
    """The tokenizer ``tokenizer=value`` names; ``hub_ok``: a value that is neither a path nor an
    encoding name is a hub id."""
    kind = tokenizer_kind(value)
    if kind == "file":
        return load_tokenizer_file(value)
    if kind == "folder":
        return load_tokenizer_folder(value)
    if kind == "tiktoken":
        return load_tiktoken(value, given=True)
    if hub_ok and not value.lower().endswith(".json"):  # a tokenizer.json is a file, never a hub id
        return load_hf_tokenizer(value)
    raise UserError(missing_tokenizer(value))


class _TokenizerFile:
    """A ``tokenizers`` tokenizer, used as ``transformers`` uses the same file; truncation and padding
    off, else a tokenizer.json saved with them would cut every text to its own limit."""

    def __init__(self, tokenizer, name: str) -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer, self.name = tokenizer, name

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text).ids

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)


def load_tokenizer_file(path: str) -> Tokenizer:
    try:
        from tokenizers import Tokenizer as _Tokenizers
    except ImportError:
        raise UserError(f"tokenizer={path}: reading a tokenizer.json needs the tokenizers library: "
                        "pip install tokenizers") from None
    try:
        return _TokenizerFile(_Tokenizers.from_file(str(Path(path).expanduser())), Path(path).name)
    except Exception as e:  # the Rust parser's errors (a message, no OSError for bad content)
        raise UserError(f"tokenizer={path}: not a tokenizer.json the tokenizers library can read ({_reason(e)}); "
                        f"give {LOCAL_TOKENIZER}, or a tiktoken encoding name such as cl100k_base") from None


def load_tokenizer_folder(path: str) -> Tokenizer:
    folder = Path(path).expanduser()
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UserError(f"tokenizer={path}: a tokenizer folder is read with transformers, which is not installed: "
                        "pip install transformers (or give the folder's tokenizer.json)") from None
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as e:
        hint = (f"; or give its tokenizer.json ({folder / 'tokenizer.json'})"
                if (folder / "tokenizer.json").is_file() else "")
        raise UserError(f"tokenizer={path}: the folder holds no Hugging Face tokenizer AutoTokenizer can load "
                        f"({_reason(e)}); it needs the tokenizer's files (tokenizer_config.json with tokenizer.json "
                        f"or the vocabulary files){hint}") from None


class _Tiktoken:
    """tiktoken with every special-token string treated as plain text: ``Encoding.encode`` raises on
    ``<|endoftext|>`` (the published run would have crashed there), and this is the only way on."""

    def __init__(self, encoding) -> None:
        self._encoding = encoding
        self.name = encoding.name

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        return self._encoding.decode(ids)


def tiktoken_cache_dir() -> str:
    """The folder tiktoken reads its encodings from, as it chooses it (``""``: caching off)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return os.environ[variable]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _tiktoken_fix(name: str) -> str:
    return (f"set TIKTOKEN_CACHE_DIR to a folder holding tiktoken's {name} file (fill one on a machine with network "
            f"access: TIKTOKEN_CACHE_DIR=DIR python -c \"import tiktoken; tiktoken.get_encoding('{name}')\", then copy "
            f"DIR here), or pass tokenizer=PATH, {LOCAL_TOKENIZER}")


def load_tiktoken(name: str = "cl100k_base", *, given: bool = False) -> Tokenizer:
    """tiktoken's encoding ``name``; ``given``: the user named it, else it is the published default."""
    what = f"tokenizer={name}" if given else f"the OpenAI encoder truncates with tiktoken's {name} (as published), and"
    try:
        import tiktoken
    except ImportError:
        raise UserError(f"{what} needs tiktoken, which is not installed: pip install 'r2med[api]' (or pip install "
                        f"tiktoken); offline, also {_tiktoken_fix(name)}") from None
    names = getattr(tiktoken, "list_encoding_names", None)
    if given and names is not None and name not in names():
        raise UserError(f"tokenizer={name}: not a file or folder, nor a tiktoken encoding "
                        f"({', '.join(names())}); give {LOCAL_TOKENIZER}, or one of those names")
    try:
        return _Tiktoken(tiktoken.get_encoding(name))
    except Exception as e:  # tiktoken downloads its BPE file on first use; offline that fails
        cache = tiktoken_cache_dir()
        where = f"its cache ({cache}) does not hold it" if cache else "its cache is off (TIKTOKEN_CACHE_DIR is empty)"
        raise UserError(f"cannot load tiktoken's {name} encoding ({_reason(e, 120)}): tiktoken downloads it on first "
                        f"use and {where}; offline, {_tiktoken_fix(name)}") from None


def load_hf_tokenizer(name_or_path: str) -> Tokenizer:
    fix = (f"download it once with network access (huggingface-cli download {name_or_path}), "
           f"or pass tokenizer=PATH, {LOCAL_TOKENIZER}")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UserError(f"the Voyage encoder truncates with the Hugging Face tokenizer {name_or_path}, "
                        "but transformers is not installed: pip install transformers") from None
    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except Exception as e:
        raise UserError(f"cannot load the Hugging Face tokenizer {name_or_path} ({type(e).__name__}): "
                        f"{fix}") from None
