"""Where the cluster is and how to reach it: address, TLS, token; one cached channel per setting.

Settings come from :func:`readie.configure` where given, else from the environment:
``READIE_ADDRESS`` (``host:port``, or several routers' as ``a:50051,b:50051``: see
:mod:`readie._routers`; required), ``READIE_INSECURE`` (``1`` for a plaintext local
cluster; TLS otherwise), ``READIE_CA_FILE`` (PEM roots to trust instead of the system's) and
``READIE_AUTH_TOKEN`` (sent as ``authorization: Bearer <token>``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, AsyncIterator, Dict, Mapping, MutableMapping, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio

from readie._routers import preferred
from readie.errors import ConfigurationError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


@dataclass(frozen=True)
class ConnectionSettings:
    """How to reach the router: ``address`` is the one a call goes to, ``routers`` every router of
    the list (empty: ``address`` alone)."""

    address: str
    insecure: bool = False
    ca_file: Optional[str] = None
    token: Optional[str] = None
    routers: Tuple[str, ...] = ()

    def addresses(self) -> Tuple[str, ...]:
        """Every router's address, in the order given."""
        return self.routers or (self.address,)

    def at(self, address: str) -> "ConnectionSettings":
        """The same settings, calling the router at ``address``."""
        return ConnectionSettings(address, self.insecure, self.ca_file, self.token, self.routers)

    def metadata(self) -> Tuple[Tuple[str, str], ...]:
        """The call metadata: the bearer token when there is one."""
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()


@dataclass(frozen=True)
class _Overrides:
    address: Union[None, str, Tuple[str, ...]] = None
    insecure: Optional[bool] = None
    ca_file: Optional[str] = None
    token: Optional[str] = None


_overrides = _Overrides()


def configure(
    address: Union[None, str, Sequence[str]] = None,
    *,
    insecure: Optional[bool] = None,
    ca_file: Optional[str] = None,
    token: Optional[str] = None,
) -> None:
    """Sets how this process reaches the cluster; what is left ``None`` comes from the environment.

    ``address`` is one ``host:port`` or several routers' (a list, or one comma-separated string): a
    call a standby router refuses moves to the leader. Each call replaces the previous
    configuration (``configure()`` returns to the environment)."""
    global _overrides
    given = address if address is None or isinstance(address, str) else tuple(address)
    _overrides = _Overrides(given, insecure, ca_file, token)


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigurationError(f"{name}={text!r} is not a flag (use 1 or 0)")


def current_settings(environ: Optional[Mapping[str, str]] = None) -> ConnectionSettings:
    """The settings in force: :func:`configure`'s, then the environment's."""
    env = os.environ if environ is None else environ
    given = _overrides.address or env.get("READIE_ADDRESS", "")
    listed = given.split(",") if isinstance(given, str) else given
    routers = tuple(dict.fromkeys(a.strip() for a in listed if a.strip()))
    if not routers:
        raise ConfigurationError(
            "no cluster address: set READIE_ADDRESS=host:port (and READIE_INSECURE=1 for a "
            "local cluster without TLS) or call readie.configure(address=...)"
        )
    insecure = _overrides.insecure
    if insecure is None:
        insecure = _flag("READIE_INSECURE", env.get("READIE_INSECURE", ""))
    ca_file = _overrides.ca_file or env.get("READIE_CA_FILE") or None
    token = _overrides.token or env.get("READIE_AUTH_TOKEN") or None
    routers_or_none = routers if len(routers) > 1 else ()
    return ConnectionSettings(preferred(routers), insecure, ca_file, token, routers_or_none)


def _credentials(settings: ConnectionSettings) -> grpc.ChannelCredentials:
    root_certificates = None
    if settings.ca_file:
        try:
            with open(settings.ca_file, "rb") as handle:
                root_certificates = handle.read()
        except OSError as error:
            raise ConfigurationError(
                f"cannot read the CA file {settings.ca_file} (READIE_CA_FILE): {error}"
            ) from error
    return grpc.ssl_channel_credentials(root_certificates=root_certificates)


_channels: Dict[ConnectionSettings, grpc.Channel] = {}
_channels_lock = threading.Lock()


class _LoopChannels:
    """The asyncio channels of one event loop, closed when the loop shuts down.

    An asyncio channel belongs to its loop, and one left open when the loop closes makes the
    interpreter complain at exit. The loop offers no close hook, but it finalizes every async
    generator it knows of on shutdown (``asyncio.run`` and ``asyncio.Runner`` do), so an idle
    generator whose ``finally`` closes the channels stands in for one."""

    def __init__(self) -> None:
        self.channels: Dict[ConnectionSettings, grpc.aio.Channel] = {}
        self._closer: Optional[AsyncIterator[None]] = None

    async def arm(self) -> None:
        if self._closer is None:
            self._closer = self._close_on_shutdown()
            await self._closer.__anext__()
            _quiet_poller_wakeups(asyncio.get_running_loop())

    async def _close_on_shutdown(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.close()

    async def close(self) -> None:
        channels = list(self.channels.values())
        self.channels.clear()
        for channel in channels:
            await channel.close()


def _quiet_poller_wakeups(loop: asyncio.AbstractEventLoop) -> None:
    """Drops grpc's spurious ``BlockingIOError`` from ``PollerCompletionQueue._handle_events`` on
    ``loop``, passing everything else on to the loop's handler.

    grpc's asyncio stack wakes every loop that made a channel (readie's own, which runs the
    blocking map, and the caller's) when one event is ready; the loops that find nothing raise
    that error, harmlessly (grpc/grpc#25364)."""
    previous = loop.get_exception_handler()

    def handler(target: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, BlockingIOError) and "PollerCompletionQueue" in repr(context.get("handle", "")):
            return
        if previous is not None:
            previous(target, context)
        else:
            target.default_exception_handler(context)

    loop.set_exception_handler(handler)


_loop_channels: "MutableMapping[asyncio.AbstractEventLoop, _LoopChannels]"
_loop_channels = weakref.WeakKeyDictionary()


def channel_for(settings: ConnectionSettings) -> grpc.Channel:
    """The process's channel for ``settings`` (created once; grpc channels are thread-safe)."""
    with _channels_lock:
        channel = _channels.get(settings)
        if channel is None:
            if settings.insecure:
                channel = grpc.insecure_channel(settings.address)
            else:
                channel = grpc.secure_channel(settings.address, _credentials(settings))
            _channels[settings] = channel
        return channel


async def aio_channel_for(settings: ConnectionSettings) -> grpc.aio.Channel:
    """The running event loop's channel for ``settings`` (an asyncio channel is tied to its loop)."""
    loop = asyncio.get_running_loop()
    per_loop = _loop_channels.get(loop)
    if per_loop is None:
        per_loop = _loop_channels[loop] = _LoopChannels()
    channel = per_loop.channels.get(settings)
    if channel is None:
        if settings.insecure:
            channel = grpc.aio.insecure_channel(settings.address)
        else:
            channel = grpc.aio.secure_channel(settings.address, _credentials(settings))
        per_loop.channels[settings] = channel
        await per_loop.arm()
    return channel


def close_channels() -> None:
    """Closes the cached synchronous channels."""
    with _channels_lock:
        channels = list(_channels.values())
        _channels.clear()
    for channel in channels:
        channel.close()


async def aclose_channels() -> None:
    """Closes the running event loop's cached asyncio channels (done anyway when the loop ends
    through ``asyncio.run``)."""
    per_loop = _loop_channels.get(asyncio.get_running_loop())
    if per_loop is not None:
        await per_loop.close()
