"""Hub settings read from the environment at call time (huggingface_hub reads them once at import, which
would freeze whatever HF_ENDPOINT / HF_HOME was set when the module was first imported), and the one way to talk
to the Hub: ``api()`` and ``auth_headers()`` carry the current endpoint and token (HF_TOKEN, else the one saved by
``quantdesk login``); ``hub_error()`` turns what huggingface_hub raises into our sentences."""

from __future__ import annotations

import os
import socket
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from app import settings
from app.errors import QuantDeskError
from app.files import write_text_atomic
from app.hub.errors import AccessDenied, DownloadError, HubError, OfflineError

if TYPE_CHECKING:
    from huggingface_hub import HfApi  # imported at call time below: the app starts without loading the Hub client

DEFAULT_ENDPOINT = "https://huggingface.co"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
REACH_TIMEOUT_S = 5.0


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline_error(action: str) -> OfflineError:
    """The sentence for an action refused in offline mode, saying how to go online: the app's own setting
    (app.settings sets HF_HUB_OFFLINE for it) is switched off in Settings, a variable of the user's by unsetting it."""
    if not settings.offline_forced_by_environment():
        return OfflineError(f"Cannot {action}: offline mode is on in QuantDesk's Settings, and this needs the Hub.",
                            "switch it off on the app's Settings page; a quantdesk command given --online goes "
                            "online for that run only; the local library works offline")
    var = settings.offline_variable() or settings.OFFLINE_VAR
    return OfflineError(f"Cannot {action}: offline mode is on ({var} is set), and this needs the Hub.",
                        f"unset {var} to go online; the local library works offline")


def require_online(action: str) -> None:
    """Raise at once when offline mode is on, or when the Hub cannot be found or reached: huggingface_hub
    would otherwise retry a dead network with backoff for half a minute before saying anything."""
    if settings.is_offline():
        raise offline_error(action)
    url = urllib.parse.urlsplit(endpoint())
    if not url.hostname or any(os.environ.get(v) for v in PROXY_VARIABLES):
        return  # behind a proxy, neither local DNS nor a direct connection says whether the Hub is reachable
    try:
        socket.getaddrinfo(url.hostname, None)
    except (socket.gaierror, UnicodeError):
        raise OfflineError(f"Cannot {action}: {url.hostname} cannot be found, so this computer seems to be offline.",
                           "connect to a network, or set HF_HUB_OFFLINE=1 to work with local models only") from None
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise OfflineError(f"Cannot reach {endpoint()} to {action}: {reason}.",
                           "check the network connection, then try again") from None


def hf_home() -> Path:
    value = os.environ.get("HF_HOME")
    if value:
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "huggingface"


def hf_hub_cache() -> Path:
    value = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(value).expanduser() if value else hf_home() / "hub"


def token_path() -> Path:
    value = os.environ.get("HF_TOKEN_PATH")
    return Path(value).expanduser() if value else hf_home() / "token"


def token() -> str | None:
    """HF_TOKEN wins, then the token file huggingface_hub's login writes."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        value = (os.environ.get(var) or "").strip()
        if value:
            return value
    try:
        value = token_path().read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return value or None


def save_token(value: str) -> Path:
    """Store a token where huggingface_hub's ``login`` keeps it (HF_HOME/token, readable by the user only),
    never in our own settings."""
    value = value.strip()
    if not value:
        raise ValueError("empty token")
    return write_text_atomic(token_path(), value, private=True)


def forget_token() -> None:
    token_path().unlink(missing_ok=True)


def api() -> HfApi:
    """An HfApi bound to the current endpoint and token (False, not None, when there is none, so
    huggingface_hub does not fall back to the token file of the HF_HOME it saw at import)."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(), token=token() or False)


def file_url(repo_id: str, filename: str, revision: str | None = None) -> str:
    """Where a file of a repo is read from, on the current endpoint (pin ``revision`` to a commit for a download)."""
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint())


def auth_headers() -> dict[str, str]:
    # huggingface_hub.utils re-exports it lazily, without the `import x as x` form that mypy takes for an export
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    from app import __version__

    return build_hf_headers(token=token() or False, library_name="quantdesk", library_version=__version__)


def hub_error(exc: Exception, repo_id: str, revision: str) -> QuantDeskError:
    """Turn huggingface_hub / httpx errors into our sentences."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return AccessDenied(f"{repo_id} is gated: the Hub refused access without an accepted licence and a token.",
                            "accept the terms on the model page, then set HF_TOKEN or run `quantdesk login`")
    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"{repo_id} has no revision {revision!r}.", "check the branch, tag or commit name")
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(f"{repo_id} was not found on {endpoint()}.",
                        "check the name; a private repo needs a token")
    if isinstance(exc, HfHubHTTPError):
        return HubError(f"The Hub answered an error for {repo_id}: {str(exc).splitlines()[0]}")
    return DownloadError(f"Cannot reach {endpoint()}: {type(exc).__name__}: {exc}",
                         "check the network connection, then run the same command again")


def api_errors() -> tuple[type[Exception], ...]:
    """What a call through ``api()`` raises when the Hub or the network fails (for ``except``)."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    return HfHubHTTPError, httpx2.HTTPError
