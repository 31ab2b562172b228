"""What of a key or a URL may be shown. Keys are read from an environment variable on every call
and never stored; they and anything shaped like one are scrubbed from every message the clients
raise, log or show, and from the openai SDK's and httpx's log lines."""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Sequence
from urllib.parse import unquote_plus

from ..errors import UserError

KEY_LIKE = re.compile(r"\b(?:sk|pa)-[A-Za-z0-9_*.\-]{3,}")
_AUTH_VALUE = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9_*.\-+/=~]{8,}")

HARMLESS_QUERY_PARAMS = frozenset({"api-version", "api_version", "model", "deployment"})
"""Query parameters whose values are shown. Every other value is masked, whatever its name: a name
cannot tell a secret apart."""

# A URL's userinfo (user, password, or a token in the user's place): up to the last "@" before the
# path; "[^/\s]" rather than the RFC's set so a password holding "?", "#" or "@" is masked whole.
# A scheme starts where a run of scheme characters starts (not at every "\b": "a.a.a..." would
# make the search quadratic).
_SCHEME = r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*://"
_URL_USERINFO = re.compile(rf"({_SCHEME})[^/\s]*@", re.I)
_URL = re.compile(rf"{_SCHEME}[^\s\"'<>]*", re.I)
# anywhere, as a URL without a scheme or a spec's fragment holds them
_QUERY_ITEM = re.compile(r"([?&;])([^=&;?#\s\"'<>]*)=([^&#\s\"'<>]*)")
_SHORTEST_ECHOED = 4  # secrets shorter than this are masked where a URL holds them, not everywhere


def _harmless(name: str) -> bool:
    return unquote_plus(name).strip().lower() in HARMLESS_QUERY_PARAMS


def _mask_query_item(m: re.Match) -> str:
    sep, name, value = m.groups()
    return m.group(0) if not value or value == "***" or _harmless(name) else f"{sep}{name}=***"


def _mask_url(m: re.Match) -> str:
    """One URL with its bare query items (``?TOKEN``) masked."""
    url = m.group(0)
    head, sep, rest = url.partition("?")
    if not sep:
        return url
    query, hash_, fragment = rest.partition("#")
    items = [item if item in ("&", ";", "", "***") or "=" in item or _harmless(item) else "***"
             for item in re.split(r"([&;])", query)]
    return head + sep + "".join(items) + hash_ + fragment


def mask_urls(text: str) -> str:
    """THE rule for what of a URL may be shown: userinfo becomes ``***@`` and every query value
    ``***`` unless ``HARMLESS_QUERY_PARAMS`` names it (a bare ``?TOKEN`` counts as a value)."""
    text = _URL_USERINFO.sub(r"\1***@", text)
    text = _URL.sub(_mask_url, text)
    return _QUERY_ITEM.sub(_mask_query_item, text)


def scrub(text: str, key: str | Sequence[str] | None = None, limit: int | None = 300) -> str:
    """One line without ``key`` nor anything shaped like a secret (OpenAI echoes a masked key on
    401), cut to ``limit`` characters."""
    text = " ".join(redact(text, key).split())
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


def redact(text: str, key: str | Sequence[str] | None = None) -> str:
    """``text`` with ``key`` (or each of several) and anything shaped like a secret as ``***``."""
    if key is None and len(text) <= 256:
        return _redact_short(text)  # a model's name or a URL, redacted on every request
    keys = [key] if isinstance(key, str) else list(key or ())
    for k in sorted((k for k in keys if k), key=len, reverse=True):  # a longer secret before its parts
        text = text.replace(k, "***")
    text = _AUTH_VALUE.sub(r"\1 ***", text)
    text = mask_urls(text)
    return KEY_LIKE.sub("***", text)


@functools.lru_cache(maxsize=512)
def _redact_short(text: str) -> str:
    return redact(text, ())


def url_secrets(url: str) -> list[str]:
    """What ``mask_urls`` hides in ``url``, as written and decoded, to mask it wherever a server
    echoes it back. Values shorter than 4 characters are left out: masked everywhere, they would
    garble messages."""
    return list(_url_secrets(url))


@functools.lru_cache(maxsize=256)  # a client's few URLs, asked on every request
def _url_secrets(url: str) -> tuple[str, ...]:
    found: list[str] = []
    m = re.match(r"[a-z][a-z0-9+.\-]*://([^/\s]*)@", url, re.I)
    if m:
        user, _, password = m.group(1).partition(":")
        found += [user, password]
    query = url.partition("?")[2].partition("#")[0]
    for item in re.split(r"[&;]", query):
        name, eq, value = item.partition("=")
        if not _harmless(name):
            found.append(value if eq else name)
    found += [unquote_plus(s) for s in found]
    return tuple(sorted({s for s in found if len(s) >= _SHORTEST_ECHOED and s != "***"}, key=len, reverse=True))


@functools.lru_cache(maxsize=256)
def show_url(url: str) -> str:
    """``url`` as it may appear in a message or a repr."""
    return scrub(url, url_secrets(url), limit=None)


def api_key(env: str, *, required: bool, who: str) -> str | None:
    """The stripped value of ``$env``; ``None`` when unset or blank, unless ``required``."""
    key = os.environ.get(env, "").strip()
    if key:
        return key
    if required:
        raise UserError(f"{who} needs an API key: set the environment variable {env} (it is read from there only)")
    return None


class _ScrubLogs(logging.Filter):
    """The SDK and its HTTP library log full URLs, which may hold a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a broken record is the logging module's to report
            return True
        clean = redact(text)
        if clean != text:
            record.msg, record.args = clean, ()
        return True


_SCRUBBED_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "openai._base_client")
_scrub_installed = False


def install_log_scrubbing() -> None:
    """Once per process: scrub the loggers that may print a URL or a header."""
    global _scrub_installed
    if not _scrub_installed:
        for name in _SCRUBBED_LOGGERS:
            logging.getLogger(name).addFilter(_ScrubLogs())
        _scrub_installed = True
