"""One webhook POST over a plain socket, bounded as a whole: connect, TLS handshake, send and the
response's status line and headers share one deadline (a monotonic clock checked before every
socket operation, the socket's timeout set to what is left), and at most ``MAX_HEAD_BYTES`` of the
response are read. A redirect is never followed. Every outcome is a ``DeliveryFailure`` category
(or a 2xx status), never the socket's own error text.

The addresses a host name resolves to are checked against the deployment's ``AddressRanges``
before connecting, and the connection goes to the address that was checked (a second lookup could
answer differently)."""

from __future__ import annotations

import ipaddress
import re
import select
import socket
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from floorgate.admission import InvalidInput
from floorgate.admission.events import DeliveryFailure, check_url, failure_text

DEFAULT_DEADLINE_SECONDS = 10.0
MAX_HEAD_BYTES = 16 * 1024  # status line and headers; the body of the answer is never read
MAX_INTERIM = 5  # 1xx answers skipped before the final one

ENV_WEBHOOK_ALLOW = "FLOORGATE_WEBHOOK_ALLOW"  # as scheduler.app.root.ENVIRONMENT names them (no import: app imports this lazily)
ENV_WEBHOOK_DENY = "FLOORGATE_WEBHOOK_DENY"

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# ``internal`` in a range list: every address that is not the public internet's.
INTERNAL_RANGES = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "64:ff9b::/96",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
)

_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-9][0-9][0-9])(?: [^\r\n]*)?")
_HEAD_END = re.compile(rb"\r?\n\r?\n")


def _networks(text: str | None, name: str) -> tuple[IPNetwork, ...]:
    found: list[IPNetwork] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if part == "internal":
            found.extend(ipaddress.ip_network(r) for r in INTERNAL_RANGES)
            continue
        try:
            found.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise InvalidInput(
                name, f"{part!r} is not an address range; give CIDRs separated by commas (10.0.0.0/8,fc00::/7) or 'internal'"
            ) from None
    return tuple(found)


@dataclass(frozen=True)
class AddressRanges:
    """Which resolved addresses a webhook may be delivered to: none in ``deny``, and when ``allow``
    is not empty, one of ``allow``. The default (both empty) allows every address, loopback
    receivers included."""

    allow: tuple[IPNetwork, ...] = ()
    deny: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, allow: str | None, deny: str | None) -> AddressRanges:
        """Ranges from comma-separated CIDRs (or ``internal``), as ``$FLOORGATE_WEBHOOK_ALLOW`` and
        ``$FLOORGATE_WEBHOOK_DENY`` give them; ``InvalidInput`` naming the variable otherwise."""
        return cls(_networks(allow, ENV_WEBHOOK_ALLOW), _networks(deny, ENV_WEBHOOK_DENY))

    def permits(self, address: IPAddress) -> bool:
        """Whether a webhook may be delivered to ``address`` (an IPv4-mapped IPv6 address is
        judged as the IPv4 address it maps)."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in net for net in self.deny if net.version == address.version):
            return False
        return not self.allow or any(address in net for net in self.allow if net.version == address.version)


@dataclass(frozen=True)
class Outcome:
    """One attempt's result: the HTTP status when there was one, and the failure category (None:
    delivered, a 2xx)."""

    status: int | None
    failure: DeliveryFailure | None = None
    location: str | None = None  # a redirect's

    @property
    def error(self) -> str | None:
        """The text the delivery log records (None when delivered)."""
        return None if self.failure is None else failure_text(self.failure, self.status, self.location)


class _Failed(Exception):
    def __init__(self, failure: DeliveryFailure) -> None:
        self.failure = failure


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise _Failed(DeliveryFailure.TIMEOUT)
        return left


def post(
    url: str, body: bytes, headers: dict[str, str], *, deadline: float = DEFAULT_DEADLINE_SECONDS, ranges: AddressRanges | None = None
) -> Outcome:
    """POST ``body`` to ``url`` within ``deadline`` seconds in all; never raises for anything the
    receiver or the network does."""
    clock = _Deadline(deadline)
    try:
        check_url(url)
        parts = urlsplit(url)
        host, tls = str(parts.hostname), parts.scheme == "https"
        port = parts.port if parts.port is not None else (443 if tls else 80)
    except ValueError:
        return Outcome(None, DeliveryFailure.INVALID_URL)
    sock: socket.socket | None = None
    try:
        sock = _connect(host, port, ranges if ranges is not None else AddressRanges(), clock)
        if tls:
            sock = _handshake(sock, host, clock)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        sock.settimeout(clock.left())
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        return _answer(sock, clock)
    except _Failed as failed:
        return Outcome(None, failed.failure)
    except TimeoutError:
        return Outcome(None, DeliveryFailure.TIMEOUT)
    except OSError:  # reset, broken pipe, ... after the connection was made
        return Outcome(None, DeliveryFailure.BAD_RESPONSE)
    finally:
        if sock is not None:
            sock.close()


def _connect(host: str, port: int, ranges: AddressRanges, clock: _Deadline) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise _Failed(DeliveryFailure.CONNECT_FAILED) from None
    allowed = [info for info in infos if ranges.permits(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))]
    if not allowed:
        raise _Failed(DeliveryFailure.ADDRESS_DENIED)
    for family, kind, proto, _, address in allowed:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(clock.left())
            sock.connect(address)
            return sock
        except TimeoutError:
            sock.close()
            raise _Failed(DeliveryFailure.TIMEOUT) from None
        except ConnectionResetError:  # accepted, then reset before connect() looked: a receiver that hangs up
            sock.close()
            raise _Failed(DeliveryFailure.BAD_RESPONSE) from None
        except OSError:
            sock.close()
        except BaseException:
            sock.close()
            raise
    raise _Failed(DeliveryFailure.CONNECT_FAILED)


def _handshake(sock: socket.socket, host: str, clock: _Deadline) -> ssl.SSLSocket:
    # Non-blocking with select: one handshake is many reads, and a per-read timeout would let a
    # slow server stretch it without bound.
    sock.setblocking(False)
    tls = ssl.create_default_context().wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    try:
        while True:
            try:
                tls.do_handshake()
                return tls
            except ssl.SSLWantReadError:
                _wait([tls], [], clock)
            except ssl.SSLWantWriteError:
                _wait([], [tls], clock)
    except ssl.SSLError:
        tls.close()
        raise _Failed(DeliveryFailure.TLS_ERROR) from None
    except BaseException:
        tls.close()
        raise


def _wait(read: Iterable[socket.socket], write: Iterable[socket.socket], clock: _Deadline) -> None:
    ready = select.select(list(read), list(write), [], clock.left())
    if not any(ready):
        raise _Failed(DeliveryFailure.TIMEOUT)


def _answer(sock: socket.socket, clock: _Deadline) -> Outcome:
    buffer = b""
    interim = 0
    while True:
        end = _HEAD_END.search(buffer)
        if end is None:
            if len(buffer) > MAX_HEAD_BYTES:
                raise _Failed(DeliveryFailure.BAD_RESPONSE)
            sock.settimeout(clock.left())
            chunk = sock.recv(min(4096, MAX_HEAD_BYTES + 1 - len(buffer)))
            if not chunk:
                raise _Failed(DeliveryFailure.BAD_RESPONSE)
            buffer += chunk
            continue
        head, buffer = buffer[: end.start()], buffer[end.end() :]
        status_line, *header_lines = re.split(rb"\r?\n", head)
        matched = _STATUS_LINE.fullmatch(status_line)
        if matched is None:
            raise _Failed(DeliveryFailure.BAD_RESPONSE)
        status = int(matched.group(1))
        if status < 200:
            interim += 1
            if status == 101 or interim > MAX_INTERIM:
                raise _Failed(DeliveryFailure.BAD_RESPONSE)
            continue
        if status < 300:
            return Outcome(status)
        if status < 400:
            location = next(
                (line.split(b":", 1)[1].strip() for line in header_lines if line.lower().startswith(b"location:")),
                b"",
            )
            return Outcome(status, DeliveryFailure.REDIRECT_REFUSED, location.decode("latin-1"))
        return Outcome(status, DeliveryFailure.HTTP_STATUS)
