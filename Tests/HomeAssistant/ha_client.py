"""Drives a real Home Assistant for healthgate's tests: onboarding, the MQTT integration, and a
dump of what HA made of the discovery (states, entity and device registries) as JSON.

Run with the Python of the Home Assistant venv (it has aiohttp):
  ha_client.py setup URL BROKER_PORT   -> prints an access token
  ha_client.py dump URL TOKEN          -> prints {"states": [...], "entities": [...], "devices": [...]}
"""
import asyncio
import json
import sys

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


def main() -> None:
    command, url = sys.argv[1], sys.argv[2]
    if command == "setup":
        print(asyncio.run(setup(url, int(sys.argv[3]))))
    elif command == "dump":
        print(json.dumps(asyncio.run(dump(url, sys.argv[3]))))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
