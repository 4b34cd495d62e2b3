"""Webhook receivers that misbehave, as real local sockets served by threads: one bad receiver
never stops the others' deliveries; each attempt has one deadline for connect, send and the
answer's head; a redirect is refused, never followed; the recorded error is a category; URLs are
checked at ``notify add``; and a deployment's address ranges are checked at delivery."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from floorgate.admission import Approvals, FixedClock, Store
from floorgate.admission.events import MAX_ATTEMPTS, Events, backoff
from floorgate.scheduler.app.notify import NotifyService
from floorgate.scheduler.runtime._webhook_http import AddressRanges, Outcome

from cli import run_cli
from console_kit import console

DEADLINE = 0.3  # seconds per attempt, injected so the hostile receivers cost little (a healthy answer takes milliseconds)
TRICKLE = 0.1  # seconds between two bytes: well under a per-read timeout; the whole answer takes 3.8 s, far past DEADLINE
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"

Behaviour = Callable[[socket.socket, threading.Event, "Server"], None]


class Server:
    """A loopback listener whose every connection is served by ``behaviour`` in its own thread;
    it records each request body it read and how many connections it accepted."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.stop = threading.Event()
        self.bodies: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the client hung up: that is its right
            self.behaviour(conn, self.stop, self)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=5)
        self.sock.close()


def read_request(conn: socket.socket, server: Server) -> None:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += conn.recv(4096)
    server.bodies.append(body)


def healthy(conn: socket.socket, stop: threading.Event, server: Server) -> None:
    read_request(conn, server)
    conn.sendall(OK)


def bad_status_line(conn: socket.socket, stop: threading.Event, server: Server) -> None:
    read_request(conn, server)
    conn.sendall(b"HTTP/1.1 2OO OK\r\n\r\n")


def never_answers(conn: socket.socket, stop: threading.Event, server: Server) -> None:
    read_request(conn, server)
    conn.settimeout(0.1)
    while not stop.is_set():
        try:
            if not conn.recv(1):
                return  # the deliverer gave up
        except TimeoutError:
            continue


def trickles(conn: socket.socket, stop: threading.Event, server: Server) -> None:
    read_request(conn, server)
    for byte in OK:  # a valid answer in the end: only a deadline over the whole answer refuses it
        if stop.wait(TRICKLE):
            return
        conn.sendall(bytes([byte]))


def closes(conn: socket.socket, stop: threading.Event, server: Server) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, at once


def redirects_to(target: str) -> Behaviour:
    def behaviour(conn: socket.socket, stop: threading.Event, server: Server) -> None:
        read_request(conn, server)
        conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n".encode())

    return behaviour


def answers(status: int) -> Behaviour:
    def behaviour(conn: socket.socket, stop: threading.Event, server: Server) -> None:
        read_request(conn, server)
        conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n".encode())

    return behaviour


@pytest.fixture
def servers() -> Iterator[Callable[[Behaviour], Server]]:
    made: list[Server] = []

    def make(behaviour: Behaviour) -> Server:
        made.append(Server(behaviour))
        return made[-1]

    try:
        yield make
    finally:
        for server in made:
            server.close()


def ask(store: Store, clock: FixedClock, count: int) -> None:
    for i in range(count):
        Approvals(store, clock).ask(f"m-{i}", "g/a/x", "max_turns", 2)


def per_delivery(events: Events) -> dict[str, list[tuple[str, int, str | None]]]:
    """Per webhook id: its deliveries' (state, attempts, last error), sorted."""
    found: dict[str, list[tuple[str, int, str | None]]] = {}
    for d in events.deliveries():
        found.setdefault(d.webhook_id, []).append((d.state.value, d.attempts, d.last_error))
    return {k: sorted(v, key=lambda x: (x[0], x[1], x[2] or "")) for k, v in found.items()}


def test_five_hostile_receivers_stop_no_delivery_to_a_healthy_one_and_go_dead_after_the_cap(
    store: Store, clock: FixedClock, servers: Callable[[Behaviour], Server]
) -> None:
    target = servers(healthy)  # where the redirect points: must never be hit
    hostile = {
        "bad_status_line": (servers(bad_status_line), "bad_response"),
        "never_answers": (servers(never_answers), "timeout"),
        "trickles": (servers(trickles), "timeout"),
        "redirects": (servers(redirects_to(target.url)), f"redirect_refused (Location: {target.url})"),
        "closes": (servers(closes), "bad_response"),
    }
    good = servers(healthy)
    notify = NotifyService(store, clock, deadline=DEADLINE)
    ids = {name: notify.add_webhook(server.url, "ask_pending")[0].webhook_id for name, (server, _) in hostile.items()}
    good_id = notify.add_webhook(good.url, "ask_pending")[0].webhook_id
    ask(store, clock, 3)

    first = notify.deliver()
    # Each hostile webhook's first event fails; its two later events wait behind that one's retry.
    assert (first.attempted, first.delivered, first.failed) == (8, 3, 5)
    assert sorted(json.loads(body)["id"] for body in good.bodies) == sorted(e.event_id for e in notify.events.list())
    for attempt in range(2, MAX_ATTEMPTS + 1):
        clock.advance(backoff(attempt - 1))
        report = notify.deliver()
        assert (report.attempted, report.delivered, report.failed) == (5, 0, 5), attempt
    clock.advance(timedelta(days=1))
    # The first events are dead (never retried on their own): the second ones' turn.
    report = notify.deliver()
    assert (report.attempted, report.delivered, report.failed) == (5, 0, 5)

    errors = per_delivery(notify.events)
    assert errors[good_id] == [("delivered", 1, None)] * 3
    assert {name: errors[ids[name]] for name in hostile} == {
        name: [("dead", MAX_ATTEMPTS, text), ("pending", 0, None), ("pending", 1, text)] for name, (_, text) in hostile.items()
    }
    assert target.connections == 0 and target.bodies == []  # the redirect was never followed
    assert len(good.bodies) == 3


def test_a_receiver_that_trickles_a_valid_answer_is_cut_at_the_attempts_deadline(
    store: Store, clock: FixedClock, servers: Callable[[Behaviour], Server]
) -> None:
    slow = servers(trickles)
    notify = NotifyService(store, clock, deadline=DEADLINE)
    notify.add_webhook(slow.url, "ask_pending")
    ask(store, clock, 1)
    assert notify.deliver().failed == 1
    (delivery,) = notify.events.deliveries()
    assert (delivery.state.value, delivery.attempts, delivery.last_status, delivery.last_error) == ("pending", 1, None, "timeout")


def test_a_redirect_is_a_failure_naming_its_location_and_is_never_followed(
    store: Store, clock: FixedClock, servers: Callable[[Behaviour], Server]
) -> None:
    target = servers(healthy)
    hostile_location = target.url + "?\x1b[31mred " + "x" * 300
    redirect = servers(redirects_to(hostile_location))
    notify = NotifyService(store, clock, deadline=DEADLINE)
    notify.add_webhook(redirect.url, "ask_pending")
    ask(store, clock, 1)
    assert notify.deliver().failed == 1
    (delivery,) = notify.events.deliveries()
    shown = (target.url + "?[31mred" + "x" * 300)[:200]  # printable ASCII only, truncated
    assert (delivery.last_status, delivery.last_error) == (302, f"redirect_refused (Location: {shown}...)")
    assert target.connections == 0


@pytest.mark.parametrize(
    "raised",
    [RuntimeError("boom"), http.client.BadStatusLine("2OO"), KeyError("x"), ValueError("x"), ConnectionResetError()],
    ids=["runtime-error", "bad-status-line", "key-error", "value-error", "reset"],
)
def test_any_exception_of_one_delivery_is_that_deliverys_failure_counted_and_dead_after_the_cap(
    store: Store, clock: FixedClock, raised: Exception
) -> None:
    delivered: list[str] = []

    def post(url: str, body: bytes, headers: dict[str, str]) -> Outcome:
        if "broken" in url:
            raise raised
        delivered.append(json.loads(body)["id"])
        return Outcome(204)

    notify = NotifyService(store, clock, post=post)
    broken = notify.add_webhook("http://127.0.0.1:9/broken", "ask_pending")[0].webhook_id
    notify.add_webhook("http://127.0.0.1:9/fine", "ask_pending")
    ask(store, clock, 3)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        report = notify.deliver()
        # The broken webhook's first event fails each round; its later two wait behind it.
        assert (report.attempted, report.failed) == ((4, 1) if attempt == 1 else (1, 1)), attempt
        clock.advance(backoff(attempt))
    assert len(delivered) == 3
    assert per_delivery(notify.events)[broken] == [("dead", MAX_ATTEMPTS, "internal_error"), ("pending", 0, None), ("pending", 0, None)]


@pytest.mark.parametrize(
    ("what", "expected"),
    [("closed", "connect_failed"), ("banner", "bad_response"), ("silent", "timeout"), ("http", "http_status_503"), ("tls", "tls_error")],
    ids=["closed-port", "open-port-non-http", "open-port-silent", "http-server", "https-to-non-tls"],
)
def test_the_recorded_error_is_a_category_not_the_sockets_text(
    store: Store, clock: FixedClock, servers: Callable[[Behaviour], Server], what: str, expected: str
) -> None:
    if what == "closed":
        probe = socket.create_server(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/"
        probe.close()  # nothing listens there now
    else:

        def banner(conn: socket.socket, stop: threading.Event, server: Server) -> None:
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            read_request(conn, server)

        url = servers({"banner": banner, "tls": banner, "silent": never_answers, "http": answers(503)}[what]).url
        url = url.replace("http://", "https://") if what == "tls" else url
    notify = NotifyService(store, clock, deadline=DEADLINE)
    notify.add_webhook(url, "ask_pending")
    ask(store, clock, 1)
    notify.deliver()
    (delivery,) = notify.events.deliveries()
    assert delivery.last_error == expected


BAD_URLS = [
    ("http://h:abc/", "a port that is not a number"),
    ("http://h:0/", "a port that is not a number"),
    ("http://h:65536/", "a port that is not a number"),
    ("http://user:pw@h/", "user info"),
    ("ftp://h/", "not an http:// or https:// URL"),
    ("http:///x", "names no host"),
    ("http://h /x", "a space, a control"),
    ("http://h/\x1b[2J", "a space, a control"),
    ("http://[zz]/", "malformed [IPv6] host"),
    ("http://ex%41mple/", "malformed host name"),
]


@pytest.mark.parametrize(("url", "says"), BAD_URLS, ids=[u for u, _ in BAD_URLS])
def test_a_bad_webhook_url_is_refused_at_add_naming_the_field(store: Store, clock: FixedClock, url: str, says: str) -> None:
    with pytest.raises(ValueError, match="^url: .*" + re.escape(says)):
        Events(store, clock).add_webhook(url, "ask_pending")
    cli = run_cli("notify", "add", url, "--events", "ask_pending", db=store.url)
    assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1 and "url: " in cli.stderr and "Traceback" not in cli.stderr
    api = console(store, clock).post("/api/webhooks", {"url": url, "events": "ask_pending"})
    assert api.status_code == 422 and "url: " in api.text, api.text
    assert Events(store, clock).webhooks() == []


@pytest.mark.parametrize(
    ("allow", "deny", "delivered"),
    [
        (None, "127.0.0.0/8", False),
        (None, "internal", False),
        ("10.0.0.0/8", None, False),
        ("127.0.0.1/32", "10.0.0.0/8", True),
        (None, None, True),
    ],
    ids=["denied-range", "denied-internal", "outside-allowed", "inside-allowed", "default-permits-loopback"],
)
def test_a_deployment_s_address_ranges_are_checked_at_delivery_against_the_resolved_address(
    store: Store, clock: FixedClock, servers: Callable[[Behaviour], Server], allow: str | None, deny: str | None, delivered: bool
) -> None:
    good = servers(healthy)
    url = good.url.replace("127.0.0.1", "localhost")  # a name: its resolved address is what is checked
    Events(store, clock).add_webhook(url, "ask_pending")
    ask(store, clock, 1)
    env = {k: v for k, v in {"FLOORGATE_WEBHOOK_ALLOW": allow, "FLOORGATE_WEBHOOK_DENY": deny}.items() if v is not None}
    result = run_cli("notify", "deliver", "--json", db=store.url, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["delivered"] == int(delivered)
    (delivery,) = Events(store, clock).deliveries()
    assert delivery.last_error == (None if delivered else "address_denied")
    assert good.connections == int(delivered)


def test_an_ipv4_mapped_address_is_judged_as_the_ipv4_one_and_a_bad_range_is_refused_naming_the_variable(store: Store) -> None:
    import ipaddress

    ranges = AddressRanges.parse(None, "127.0.0.0/8")
    assert not ranges.permits(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert ranges.permits(ipaddress.ip_address("::1")) and ranges.permits(ipaddress.ip_address("192.0.2.1"))
    bad = run_cli("notify", "deliver", db=store.url, env={"FLOORGATE_WEBHOOK_DENY": "10.0.0.0/8,nope"})
    assert bad.returncode == 2 and bad.stderr.strip().startswith(
        "floorgate: error: FLOORGATE_WEBHOOK_DENY: 'nope' is not an address range"
    ), bad.stderr


def test_a_claimed_delivery_is_not_started_when_its_claim_would_lapse_during_the_attempt(store: Store, clock: FixedClock) -> None:
    from floorgate.admission.events import CLAIM_LEASE

    calls: list[str] = []

    def post(url: str, body: bytes, headers: dict[str, str]) -> Outcome:
        calls.append(url)
        return Outcome(204)

    notify = NotifyService(store, clock, post=post, deadline=CLAIM_LEASE.total_seconds() + 1)
    notify.add_webhook("http://127.0.0.1:9/hook", "ask_pending")
    ask(store, clock, 2)
    assert notify.deliver().attempted == 0 and calls == []  # another deliverer may own them by then
    assert [(d.state.value, d.attempts, d.next_attempt_at) for d in notify.events.deliveries()] == [
        ("pending", 0, clock.now() + CLAIM_LEASE)
    ] * 2
