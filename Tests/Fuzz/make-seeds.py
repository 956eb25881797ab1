#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (Tests/Fuzz/corpus/<target>/) from the tests' own bodies
and configs: the JSON, CSV and line-protocol literals of Tests/GatewayTests (those without Swift
interpolation), the repository's configs, and a few built here from those (gzip'd line protocol,
header blocks). Seeds are named by a hash of their bytes, so running it again adds, never renames.
Usage: python3 Tests/Fuzz/make-seeds.py"""
import glob, gzip, hashlib, json, os, re

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(root, "Tests", "Fuzz", "corpus")

def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)

def literals(path):
    s = open(path, encoding="utf-8").read()
    multi = [re.sub(r"(?m)^ {4,8}", "", m) for m in re.findall(r'#"""\n(.*?)\n\s*"""#', s, re.S)]
    single = re.findall(r'#"(.*?)"#', s)
    return [l for l in multi + single if "\\#(" not in l]

def is_json(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False

for path in sorted(glob.glob(os.path.join(root, "Tests", "GatewayTests", "**", "*.swift"), recursive=True)):
    name = os.path.basename(path)
    for lit in literals(path):
        text = lit.strip()
        if text.startswith("{") and is_json(text):
            o = json.loads(text)
            if "data" in o and isinstance(o["data"], dict):
                put("hae", text)
            elif "device_id" in o or "chunk" in o:
                put("ingest", text)
            elif name.startswith("HealthSync") or "export_id" in o or "exportId" in o:
                put("healthsync", text)
            elif "samples" in o or "deleted" in o or "characteristics" in o:
                put("syncky-native", text)
            elif "uuid" in o and "type" in o:   # one Syncky sample: in a body of its own
                put("syncky-native", json.dumps({"v": 1, "type": "sync", "device": "d_fuzz", "samples": [o], "deleted": []},
                                                separators=(",", ":")))
        elif re.match(r"^[a-z_]+(,[^ ]+)? [a-z_]+=", text) and "\n" in text + "\n":
            put("syncky-influx", text + "\n")
            put("influx", text + "\n")
            put("influx", gzip.compress((text + "\n").encode(), mtime=0))
            put("influx", "?precision=s\n" + text + "\n")

# The Syncky CSV bodies: the header row and rows of the tests' own CSV.
formats = open(os.path.join(root, "Tests", "GatewayTests", "SynckyFormatsTests.swift"), encoding="utf-8").read()
m = re.search(r'static let csv = (.*?)\n\n', formats, re.S)
if m:
    rows = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))
    body = "".join(r.replace("\\r\\n", "\r\n").replace('\\"', '"') for r in rows)
    put("syncky-csv", body)
    lines = body.split("\r\n")
    for row in lines[1:]:
        if row:
            put("syncky-csv", lines[0] + "\r\n" + row + "\r\n")

# Header blocks: the signed receiver's own headers, then variations a stranger would try.
native = sorted(glob.glob(os.path.join(out, "syncky-native", "*")))
body = open(native[0], "rb").read() if native else b'{"samples":[]}'
for head in ["Authorization: Bearer fuzz-token-0123456789abcdef\nX-Syncky-Format: native\nX-Syncky-Timestamp: 1796000000",
             "Authorization: Bearer fuzz-token-0123456789abcdef\nX-Syncky-Format: native\nX-Syncky-Timestamp: 1796000000\nX-Syncky-Signature: v1=00ff",
             "Authorization: Basic ZnV6ejpmdXp6LXRva2VuLTAxMjM0NTY3ODlhYmNkZWY=\nContent-Type: application/json",
             "Authorization: bearer  fuzz-token-0123456789abcdef\nX-Syncky-Format: csv\nX-Syncky-Kind: results"]:
    put("headers", head.encode() + b"\n\n" + body)

# Configs: the example, the contrib ones and the embedded default's shape.
for path in [os.path.join(root, "config.example.yaml")] + sorted(glob.glob(os.path.join(root, "contrib", "configs", "*.yaml"))):
    put("config", open(path, "rb").read())
