"""Prints the Python requirements of the Home Assistant integrations healthgate's test starts
(the ones HA always sets up, the frontend, the recorder, MQTT and what MQTT's platforms import),
read from the installed integrations' manifests, so that `hass --skip-pip` starts clean."""
import json
import pathlib

from homeassistant import bootstrap
import homeassistant.components as components

base = pathlib.Path(components.__file__).parent
roots = (set(bootstrap.DEFAULT_INTEGRATIONS) | bootstrap.FRONTEND_INTEGRATIONS | bootstrap.RECORDER_INTEGRATIONS
         | bootstrap.CORE_INTEGRATIONS | {"mqtt", "api", "onboarding", "system_log",
                                          # MQTT sets up every entity platform; camera imports stream.
                                          "camera", "stream"})
seen: set[str] = set()


def visit(domain: str) -> None:
    if domain in seen:
        return
    seen.add(domain)
    manifest = base / domain / "manifest.json"
    if manifest.exists():
        for d in json.loads(manifest.read_text()).get("dependencies", []):
            visit(d)


for r in sorted(roots):
    visit(r)
requirements = set()
for d in seen:
    manifest = base / d / "manifest.json"
    if manifest.exists():
        requirements.update(json.loads(manifest.read_text()).get("requirements", []))
print("\n".join(sorted(requirements)))
