"""Secrets out of everything stored or printed: URLs with credentials, known secret values in text.

Some gateways take the key inside the endpoint URL (``http://user:KEY@host/v1`` or
``...?api_key=KEY``). The request needs the real URL; every copy that is written to a file, a
row, a log line or the terminal goes through ``redact_url`` (one URL) or ``redact`` (free text:
error messages, reasons), which also removes known secret values such as the API key read from
the environment. Not handled here: reading keys (each backend reads its own variable).
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

MASK = "***"
# query parameters whose value is a credential (compared lower-case): these names, and any name
# with one of the words below as a part between ``-``, ``_`` or ``.`` (Azure's ``subscription-key``
# and ``code``, ``client_secret``, ``x-amz-signature``, ``apikey``; not ``author`` or ``design``).
SECRET_PARAMS = frozenset({"key", "api_key", "api-key", "apikey", "token", "access_token", "sig"})
_SECRET_WORDS = re.compile(
    r"(^|[-_.])(\w*key|token|secret|sig|signature|code|pass|password|passwd|pwd|auth|credentials?|session)([-_.]|$)",
    re.IGNORECASE,
)


def is_secret_param(name: str) -> bool:
    """Whether a URL query parameter called ``name`` carries a credential."""
    return name.lower() in SECRET_PARAMS or bool(_SECRET_WORDS.search(name))


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
_MIN_SECRET = 4  # shorter "secrets" (placeholders, empty strings) would mask ordinary words


def redact_url(url: str | None) -> str | None:
    """``url`` without credentials: userinfo becomes ``***@`` and secret query values ``***``.

    Example::

        >>> redact_url("http://user:sk-123@host:8000/v1?api_key=sk-123&x=1")
        'http://***@host:8000/v1?api_key=***&x=1'

    None stays None; a string that is not a URL comes back unchanged.
    """
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _crude(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_param(k) for k, _ in pairs):
            query = "&".join(
                f"{seg.split('=', 1)[0]}={MASK}" if is_secret_param(seg.split("=", 1)[0]) else seg
                for seg in query.split("&")
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _crude(text: str) -> str:
    """For a URL ``urlsplit`` refuses: mask what looks like userinfo and key parameters."""
    text = re.sub(r"(://)[^/@\s]*@", r"\1" + MASK + "@", text)
    return re.sub(
        r"([?&]([^=&#\s]*)=)([^&#\s]*)",
        lambda m: m.group(1) + (MASK if is_secret_param(m.group(2)) else m.group(3)),
        text,
    )


def url_secrets(url: str | None) -> list[str]:
    """The credential values inside ``url`` (userinfo parts, secret query values), to scrub from text.

    ``url_secrets("http://u:pass@h/v1?token=t0k3n")`` -> ``['u:pass', 'pass', 'dTpwYXNz', 't0k3n']``
    (the third is ``u:pass`` as HTTP Basic auth sends it; values under 4 characters are left out).
    """
    if not url:
        return []
    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return []
    found = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        # the HTTP client sends userinfo as Basic auth, base64-encoded: a server may echo that back
        basic = base64.b64encode(unquote(userinfo).encode("utf-8")).decode("ascii")
        found += [userinfo, *userinfo.split(":", 1)[1:], basic]
    found += [v for k, v in pairs if is_secret_param(k)]
    return [s for s in found if len(s) >= _MIN_SECRET]


def redact(text, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each URL passed through ``redact_url`` and each known secret value masked.

    Example::

        >>> redact("401 for http://u:pw1234@h/v1: bad key sk-XYZ9", ["sk-XYZ9"])
        '401 for http://***@h/v1: bad key ***'

    Values shorter than 4 characters (placeholders) are left alone.
    """
    text = str(text)
    for s in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True):
        text = text.replace(s, MASK)
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


class RedactingFilter(logging.Filter):
    """A logging filter that passes each record's message through ``redact`` (for the HTTP
    libraries' own loggers, which print the request URL)."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except (TypeError, ValueError):
            return True
        clean = redact(msg, self.secrets)
        if clean != msg:
            record.msg, record.args = clean, None
        return True
