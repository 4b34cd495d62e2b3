"""Builders for the console tests: an app over a store with an owner and a viewer, and an ask."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.testclient import TestClient

from floorgate.admission import Approvals, FixedClock, Missions, Store
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.console import create_app

from helpers import add_automation


@dataclass
class Console:
    fg: Floorgate
    client: TestClient
    owner: str  # tokens
    viewer: str

    def headers(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.owner}"}

    def get(self, path: str, token: str | None = None):  # type: ignore[no-untyped-def]
        return self.client.get(path, headers=self.headers(token))

    def post(self, path: str, body: object = None, token: str | None = None):  # type: ignore[no-untyped-def]
        return self.client.post(path, json=body if body is not None else {}, headers=self.headers(token))


def console(store: Store, clock: FixedClock | None = None) -> Console:
    fg = Floorgate(store, clock=clock)
    _, owner = fg.principals.add("ops", "owner")
    _, viewer = fg.principals.add("watcher", "viewer")
    return Console(fg, TestClient(create_app(fg)), owner, viewer)


def pending_ask(store: Store, clock: FixedClock, automation_id: str = "x") -> str:
    """An automation whose mission waits for its owner on one ask; returns the ask's id."""
    add_automation(store, clock, automation_id)
    mission = Missions(store, clock).open(automation_id, "g", "a")
    return Approvals(store, clock).ask(mission.mission_id, f"g/a/{automation_id}", "max_turns", 5).approval_id


def post_signin(client: TestClient, token: str, **kwargs: object):  # type: ignore[no-untyped-def]
    """POST the sign-in form as a browser does: read the form first (its CSRF token and cookie)."""
    import re

    found = re.search(r'name="signin_csrf" value="([^"]+)"', client.get("/signin").text)
    assert found is not None
    return client.post("/signin", data={"token": token, "signin_csrf": found.group(1)}, **kwargs)  # type: ignore[arg-type]


def sign_in(c: Console, token: str | None = None) -> str:
    """Sign the client in; returns the CSRF token the pages carry."""
    import re

    r = post_signin(c.client, token or c.owner, follow_redirects=False)
    assert r.status_code == 303, r.text
    page = c.client.get("/settings").text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def post_form(c: Console, path: str, data: dict[str, str]):  # type: ignore[no-untyped-def]
    """POST a page's form as a browser does: (the 303 it is answered with, the page it leads to).
    The page says what the POST did once (its ``data-status`` is the status the outcome had)."""
    first = c.client.post(path, data=data, follow_redirects=False)
    assert first.status_code == 303, (first.status_code, first.text[:300])
    return first, c.client.get(first.headers["location"])
