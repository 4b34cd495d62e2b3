"""The console under hostile clients, against a real ``floorgate serve`` process on loopback:
cross-site and forged sign-ins, lock keys, forwarded headers, Host, security headers, body and
nesting limits, and a bounded load of slow, idle and oversized requests."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from floorgate.admission import open_store
from floorgate.scheduler.app.root import Floorgate

from helpers import wait_for


@dataclass
class Served:
    base: str
    port: int
    pid: int
    owner: str  # ops
    lead: str  # another owner's token
    log: Path
    proc: subprocess.Popen[bytes]

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(sqlite_db: str, tmp_path: Path, *flags: str) -> Iterator[Served]:
    with open_store(sqlite_db) as store:
        fg = Floorgate(store)
        _, owner = fg.principals.add("ops", "owner")
        _, lead = fg.principals.add("lead", "owner")
    port = _free_port()
    log = tmp_path / "serve.log"
    argv = [sys.executable, "-m", "floorgate", "--db", sqlite_db, "serve", "--port", str(port), "--deliver-every", "0", *flags]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    served = Served(f"http://127.0.0.1:{port}", port, proc.pid, owner, lead, log, proc)

    def up() -> bool:
        try:
            return httpx.get(f"{served.base}/signin", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=90, what="floorgate serve to answer")
        yield served
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def served(sqlite_db: str, tmp_path: Path) -> Iterator[Served]:
    yield from _serve(sqlite_db, tmp_path, "--header-timeout", "1s", "--max-connections", "40")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_stop_signal_ends_the_console_with_a_line_and_exit_0(sqlite_db: str, tmp_path: Path, sig: signal.Signals) -> None:
    stopping = _serve(sqlite_db, tmp_path)
    served = next(stopping)
    served.proc.send_signal(sig)
    assert served.proc.wait(timeout=60) == 0
    assert f"floorgate: console stopped ({sig.name})" in served.log.read_text()
    next(stopping, None)


def _signin(client: httpx.Client, token: str, **headers: str) -> httpx.Response:
    found = re.search(r'name="signin_csrf" value="([^"]+)"', client.get("/signin").text)
    assert found is not None
    return client.post("/signin", data={"token": token, "signin_csrf": found.group(1)}, headers=headers)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Origin": "http://evil.example"}, id="another-site-origin"),
        pytest.param({"Origin": "http://127.0.0.1:1"}, id="another-local-port"),
        pytest.param({"Origin": "null"}, id="opaque-origin"),
        pytest.param({"Sec-Fetch-Site": "cross-site"}, id="sec-fetch-cross-site"),
        pytest.param({"Sec-Fetch-Site": "same-site"}, id="sec-fetch-same-site"),
    ],
)
def test_a_cross_site_sign_in_is_refused_and_never_counts_toward_a_lock(served: Served, headers: dict[str, str]) -> None:
    with served.client() as c:
        for i in range(25):
            assert _signin(c, f"fgo_ops.guess{i}", **headers).status_code == 403
        assert _signin(c, "fgo_ops.guess", **headers).status_code == 403  # nor a repeat of one token
        own = {"Origin": served.base, "Sec-Fetch-Site": "same-origin"}
        r = _signin(c, served.owner, **own)
        assert r.status_code == 303 and r.headers["location"] == "/dashboard"


def test_a_sign_in_without_the_forms_csrf_token_is_refused(served: Served) -> None:
    with served.client() as c:
        # Refused with a redirect to the form, which says why with the refusal's status.
        assert c.post("/signin", data={"token": served.owner}, follow_redirects=True).status_code == 403  # login CSRF: the token alone
        c.get("/signin")
        assert c.post("/signin", data={"token": served.owner, "signin_csrf": "forged" * 5}, follow_redirects=True).status_code == 403
        assert _signin(c, served.owner).headers["location"] == "/dashboard"


def test_guessing_locks_one_name_from_one_address_and_not_everybody(served: Served) -> None:
    with served.client() as c:
        for i in range(20):
            assert c.get("/api/whoami", headers=_bearer(f"fgo_ops.guess{i}")).status_code == 401
        r = c.get("/api/whoami", headers=_bearer(served.owner))
        assert r.status_code == 429 and "for ops from 127.0.0.1" in r.json()["error"]["message"]
        assert c.get("/api/whoami", headers=_bearer(served.lead)).json()["name"] == "lead"  # same address, another name
        assert _signin(c, served.lead).headers["location"] == "/dashboard"


@pytest.mark.parametrize(
    ("flags", "locked"),
    [pytest.param((), True, id="no-proxy-trusted"), pytest.param(("--trusted-proxy", "127.0.0.1"), False, id="proxy-trusted")],
)
def test_forwarded_for_is_ignored_unless_the_proxy_is_trusted(sqlite_db: str, tmp_path: Path, flags: tuple[str, ...], locked: bool) -> None:
    server = _serve(sqlite_db, tmp_path, *flags)
    served = next(server)
    try:
        with served.client() as c:
            for i in range(25):  # each from an address of the client's choosing
                c.get("/api/whoami", headers={**_bearer(f"fgo_ops.guess{i}"), "X-Forwarded-For": f"10.0.0.{i}"})
            r = c.get("/api/whoami", headers={**_bearer(served.owner), "X-Forwarded-For": "10.0.0.99"})
            assert (r.status_code == 429) is locked, r.text
    finally:
        server.close()


SECURITY = {
    "content-security-policy": "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


@pytest.mark.parametrize("path", ["/signin", "/dashboard", "/api/whoami", "/api/openapi.json", "/nowhere"])
def test_every_response_carries_the_security_headers(served: Served, path: str) -> None:
    r = httpx.get(served.base + path)
    for name, value in SECURITY.items():
        assert value in r.headers.get(name, ""), (path, name)


@pytest.mark.parametrize(
    ("host", "status"),
    [
        pytest.param("127.0.0.1:{port}", 200, id="address"),
        pytest.param("localhost:{port}", 200, id="localhost"),
        pytest.param("evil.example:{port}", 400, id="rebinding-name"),
        pytest.param("127.0.0.1:1", 400, id="another-port"),
        pytest.param("", 400, id="empty"),
    ],
)
def test_only_the_served_host_names_are_answered(served: Served, host: str, status: int) -> None:
    r = httpx.get(served.base + "/signin", headers={"Host": host.format(port=served.port)})
    assert r.status_code == status


def _rss_kib(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", text)
    assert found is not None
    return int(found.group(1))


def _status_of(port: int, request: bytes) -> int:
    """The status line's code of the answer to raw ``request`` bytes (headers only, body unsent)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        head = s.recv(1 << 16)
    return int(head.split(b" ", 2)[1])


def test_an_oversized_body_is_413_before_it_is_read(served: Served) -> None:
    before = _rss_kib(served.pid)
    auth = f"Authorization: Bearer {served.owner}\r\n".encode()
    for path, extra in (("/api/policy/preview", auth), ("/signin", b"Content-Type: application/x-www-form-urlencoded\r\n")):
        head = b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sContent-Length: %d\r\n\r\n" % (path.encode(), served.port, extra, 256 << 20)
        assert _status_of(served.port, head) == 413, path  # refused by its Content-Length, nothing read

    def chunks() -> Iterator[bytes]:
        for _ in range(64):  # 64 MiB, streamed without a Content-Length
            yield b" " * (1 << 20)

    try:
        streamed = httpx.post(served.base + "/api/policy/preview", headers=_bearer(served.owner), content=chunks(), timeout=30)
        assert streamed.status_code == 413
    except httpx.TransportError:
        pass  # the server answered 413 and closed while the body was still being sent
    assert _rss_kib(served.pid) - before < 32 * 1024  # never held the body
    assert httpx.get(served.base + "/api/whoami", headers=_bearer(served.owner)).status_code == 200


@pytest.mark.parametrize(
    ("path", "field"),
    [
        pytest.param("/api/policy/history?limit=99999999999999999999", "limit", id="limit-over-int64"),
        pytest.param("/api/missions?limit=1000001", "limit", id="limit-over-max"),
        pytest.param("/api/starts?limit=%EF%BC%91", "limit", id="fullwidth-digit"),
        pytest.param("/api/starts?limit=1001", "limit", id="just-over-max"),
        pytest.param("/api/events?limit=5000", "limit", id="events-limit"),
    ],
)
def test_an_out_of_range_count_is_422_naming_it(served: Served, path: str, field: str) -> None:
    r = httpx.get(served.base + path, headers=_bearer(served.owner))
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text


@pytest.mark.parametrize("depth", [17, 1000, 100_000])
def test_deeply_nested_json_is_422_not_a_traceback(served: Served, depth: int) -> None:
    body = "[" * depth + "]" * depth
    r = httpx.post(
        served.base + "/api/policy/preview", headers=_bearer(served.owner), content=json.dumps({"compute": 0})[:-1] + f', "x": {body}}}'
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "body", r.text
    assert "Traceback" not in served.log.read_text()


def test_slow_headers_idle_connections_and_a_big_body_leave_the_console_answering(served: Served) -> None:
    """A bounded load: more half-sent and idle connections than the cap (40), and one big body."""
    held: list[socket.socket] = []
    try:
        for i in range(120):
            s = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            if i % 2:
                s.sendall(b"GET /signin HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # headers never finished
            held.append(s)
        big = socket.create_connection(("127.0.0.1", served.port), timeout=5)
        held.append(big)
        big.sendall(b"POST /api/policy/preview HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 999999999\r\n\r\n" % served.port)

        def answered() -> bool:
            try:
                return httpx.get(served.base + "/api/whoami", headers=_bearer(served.owner), timeout=3).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(answered, timeout=20, what="a legitimate request to be answered under load")

        def closed(s: socket.socket) -> bool:
            try:
                s.settimeout(5)
                return s.recv(1 << 16) == b"" or True
            except OSError:
                return True

        assert all(closed(s) for s in held)  # every held connection was answered or closed by the server
    finally:
        for s in held:
            s.close()
    assert served.log.stat().st_size < 8 * 1024, served.log.read_text()[-2000:]


def test_a_flood_of_accept_errors_is_logged_once_a_second_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    from floorgate.scheduler.console.server import ThrottledLoopErrors

    now = [100.0]
    handler = ThrottledLoopErrors(clock=lambda: now[0])
    context = {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many open files")}
    with caplog.at_level("ERROR", logger="floorgate.serve"):
        for _second in range(3):
            for _ in range(1000):
                handler(None, context)  # type: ignore[arg-type]
            now[0] += 1.0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and "Too many open files" in lines[0]
    assert lines[1].endswith("(999 more like it not logged)") and "Traceback" not in "".join(lines)


def test_the_consoles_own_form_is_not_cross_site_though_its_origin_is_null(served: Served) -> None:
    """Under Referrer-Policy: no-referrer a browser posts the page's own form with Origin: null."""
    with served.client() as c:
        assert _signin(c, served.owner, Origin="null", **{"Sec-Fetch-Site": "same-origin"}).headers["location"] == "/dashboard"
