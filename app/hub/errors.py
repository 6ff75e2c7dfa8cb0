"""Errors of the Hub, download and library code: each carries a sentence for the user and a hint."""

from __future__ import annotations

from app.errors import QuantDeskError


class HubError(QuantDeskError):
    """The Hub answered with something we cannot use (not found, bad reply)."""


class OfflineError(HubError):
    """HF_HUB_OFFLINE is set and the action needs the network; no connection was attempted."""


class AccessDenied(HubError):
    """A gated or private repo, and no token or a token without access."""


class RemoteReadError(HubError):
    """The Hub (or a mirror) could not serve the bytes we asked for (a header read by HTTP Range)."""


class DownloadError(QuantDeskError):
    """A download could not finish (network gave up, server kept failing)."""


class IntegrityError(DownloadError):
    """A downloaded file does not match the Hub's size or hash; nothing was installed."""


class NotEnoughDiskSpace(DownloadError):
    """The target disk lacks room for the download."""


class UnsafeFileName(DownloadError):
    """A file name from the Hub or the user would land outside the models folder."""


class DownloadPaused(DownloadError):
    """The download was paused or cancelled; a paused one keeps its partial files for a later resume."""


class LibraryError(QuantDeskError):
    """A library operation failed (unknown model, unreadable file)."""
