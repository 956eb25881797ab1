"""Drives a real Home Assistant for healthgate's tests: onboarding, the MQTT integration, and a
dump of what HA made of the discovery (states, entity and device registries) as JSON.

Run with the Python of the Home Assistant venv (it has aiohttp):
  ha_client.py setup URL BROKER_PORT   -> prints an access token
  ha_client.py dump URL TOKEN          -> prints {"states": [...], "entities": [...], "devices": [...]}
  ha_client.py signin URL PATH DIR     -> prints the URL of a page that signs the frontend in and opens PATH
  ha_client.py colors PNG              -> prints {"#rrggbb": pixels} of a screenshot (Pillow, in HA's venv)
  ha_client.py screenshot URL PNG W H SECONDS -> headless Chromium opens URL, waits, saves what it shows
"""
import asyncio
import base64
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile

import aiohttp

CLIENT_ID = "http://127.0.0.1/"


async def setup(url: str, broker_port: int) -> str:
    async with aiohttp.ClientSession() as s:
        # Onboarding: the owner, then a token for the owner.
        r = await s.post(f"{url}/api/onboarding/users", json={
            "client_id": CLIENT_ID, "name": "Test", "username": "test", "password": "test-password-1", "language": "en"})
        r.raise_for_status()
        code = (await r.json())["auth_code"]
        r = await s.post(f"{url}/auth/token", data={"grant_type": "authorization_code", "code": code, "client_id": CLIENT_ID})
        r.raise_for_status()
        token = (await r.json())["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        # (The other onboarding steps add integrations of their own, such as a weather
        # service: not needed to use the API.)
        # The MQTT integration, as a user adds it: broker and port.
        r = await s.post(f"{url}/api/config/config_entries/flow", json={"handler": "mqtt"}, headers=auth)
        r.raise_for_status()
        flow = await r.json()
        while flow.get("type") == "form":
            r = await s.post(f"{url}/api/config/config_entries/flow/{flow['flow_id']}",
                             json={"broker": "127.0.0.1", "port": broker_port} if flow.get("step_id") == "broker" else {},
                             headers=auth)
            r.raise_for_status()
            flow = await r.json()
        if flow.get("type") != "create_entry":
            raise SystemExit(f"the MQTT integration was not added: {json.dumps(flow)}")
        return token


async def dump(url: str, token: str) -> dict:
    auth = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as s:
        r = await s.get(f"{url}/api/states", headers=auth)
        r.raise_for_status()
        states = await r.json()
        out = {"states": states}
        async with s.ws_connect(f"{url}/api/websocket") as ws:
            await ws.receive_json()   # auth_required
            await ws.send_json({"type": "auth", "access_token": token})
            if (await ws.receive_json()).get("type") != "auth_ok":
                raise SystemExit("websocket auth refused")
            for i, (key, kind) in enumerate((("entities", "config/entity_registry/list"),
                                             ("devices", "config/device_registry/list")), start=1):
                await ws.send_json({"id": i, "type": kind})
                reply = await ws.receive_json()
                if not reply.get("success"):
                    raise SystemExit(f"{kind}: {json.dumps(reply)}")
                out[key] = reply["result"]
        return out


async def signin(url: str, path: str, config_dir: str) -> str:
    """A page of Home Assistant's own origin (`/local/`, its config's www dir) that signs the
    frontend in as the test user and opens PATH: the tokens a login gives, where the frontend
    keeps them (localStorage `hassTokens`)."""
    client = url + "/"
    async with aiohttp.ClientSession() as s:
        r = await s.post(f"{url}/auth/login_flow", json={
            "client_id": client, "handler": ["homeassistant", None], "redirect_uri": client})
        r.raise_for_status()
        flow = await r.json()
        r = await s.post(f"{url}/auth/login_flow/{flow['flow_id']}", json={
            "client_id": client, "username": "test", "password": "test-password-1"})
        r.raise_for_status()
        done = await r.json()
        if done.get("type") != "create_entry":
            raise SystemExit(f"login refused: {json.dumps(done)}")
        r = await s.post(f"{url}/auth/token", data={
            "grant_type": "authorization_code", "code": done["result"], "client_id": client})
        r.raise_for_status()
        tokens = await r.json()
        # The frontend shows what onboarding has left (the home's location …) before anything:
        # finish it, as a user clicking "next" would. (The location step is marked done first,
        # then sets up a weather service and others, whose packages this venv has not: a 500.)
        auth = {"Authorization": f"Bearer {tokens['access_token']}"}
        for step, body in (("core_config", {}), ("analytics", {}), ("integration", {"client_id": client, "redirect_uri": client})):
            r = await s.post(f"{url}/api/onboarding/{step}", json=body, headers=auth)
            if r.status not in (200, 403) and not (step == "core_config" and r.status == 500):  # 403: done already
                raise SystemExit(f"onboarding step {step}: {r.status} {await r.text()}")
    tokens.update({"hassUrl": url, "clientId": client})
    name = "signin-" + secrets.token_hex(8) + ".html"
    with open(os.path.join(config_dir, "www", name), "w") as f:
        f.write("<!doctype html><script>const t = " + json.dumps(tokens) + ";\n"
                "t.expires = Date.now() + t.expires_in * 1000;\n"
                "localStorage.setItem('hassTokens', JSON.stringify(t));\n"
                "location.replace(" + json.dumps(path) + ");</script>\n")
    return f"{url}/local/{name}"


async def screenshot(url: str, png: str, width: int, height: int, seconds: float) -> None:
    """Over the DevTools protocol, so that the page has real seconds to load what it asks its
    server for over its websocket (`--screenshot` with a virtual-time budget shoots before)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    profile = tempfile.mkdtemp(prefix="chromium-")
    browser = subprocess.Popen(
        ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={width},{height}", f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(200):
                try:
                    pages = [t for t in await (await s.get(f"http://127.0.0.1:{port}/json")).json() if t["type"] == "page"]
                    if pages:
                        break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise SystemExit("chromium did not start")
            async with s.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                ids = iter(range(1, 1 << 30))

                async def call(method: str, params: dict) -> dict:
                    n = next(ids)
                    await ws.send_json({"id": n, "method": method, "params": params})
                    while True:
                        m = await ws.receive_json()
                        if m.get("id") == n:
                            if "error" in m:
                                raise SystemExit(f"{method}: {m['error']}")
                            return m["result"]

                await call("Page.navigate", {"url": url})
                await asyncio.sleep(seconds)
                shot = await call("Page.captureScreenshot", {"format": "png"})
        with open(png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    finally:
        browser.kill()
        browser.wait()


def colors(png: str) -> dict:
    from PIL import Image  # Home Assistant's own dependency
    counts = Image.open(png).convert("RGB").getcolors(maxcolors=1 << 24) or []
    return {"#%02x%02x%02x" % rgb: n for n, rgb in sorted(counts, reverse=True)[:200]}


def main() -> None:
    command, url = sys.argv[1], sys.argv[2]
    if command == "setup":
        print(asyncio.run(setup(url, int(sys.argv[3]))))
    elif command == "signin":
        print(asyncio.run(signin(url, sys.argv[3], sys.argv[4])))
    elif command == "screenshot":
        asyncio.run(screenshot(url, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])))
    elif command == "colors":
        print(json.dumps(colors(url)))
    elif command == "dump":
        print(json.dumps(asyncio.run(dump(url, sys.argv[3]))))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
