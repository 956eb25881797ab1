#!/bin/sh
# Builds healthgate_<version>_<arch>.deb from a release binary linked with --static-swift-stdlib:
#   packaging/deb/build.sh BINARY VERSION OUTDIR
# Depends: is what dpkg-shlibdeps finds the binary links (Debian's libraries), not typed here.
set -eu
bin=$1 version=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
arch=$(dpkg --print-architecture)
if ldd "$bin" | grep -q 'libswift'; then
    echo "$bin links the Swift runtime dynamically: build it with --static-swift-stdlib" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/stage
mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/usr/lib/sysusers.d" \
         "$stage/usr/share/healthgate" "$stage/usr/share/doc/healthgate" "$stage/usr/share/man/man1" \
         "$stage/usr/share/bash-completion/completions"
install -m 0755 "$bin" "$stage/usr/bin/healthgate"
strip --strip-unneeded "$stage/usr/bin/healthgate"
sed 's|^ExecStart=/usr/local/bin/healthgate |ExecStart=/usr/bin/healthgate |' "$root/contrib/systemd/healthgate.service" \
    > "$stage/lib/systemd/system/healthgate.service"
install -m 0644 "$root/contrib/systemd/healthgate.sysusers" "$stage/usr/lib/sysusers.d/healthgate.conf"
install -m 0644 "$root/config.example.yaml" "$stage/usr/share/healthgate/config.example.yaml"
(cd "$root" && for f in contrib/configs/*.yaml contrib/caddy/Caddyfile contrib/grafana/*.json; do
    install -D -m 0644 "$f" "$stage/usr/share/healthgate/$f"; done)
(cd "$root" && for f in README.md ARCHITECTURE.md docs/*.md docs/sinks/*.md docs/status-page.png; do
    install -D -m 0644 "$f" "$stage/usr/share/doc/healthgate/$f"; done)
{ echo "healthgate, a gateway for Apple Health data"; echo; echo "License: Apache-2.0"; echo; cat "$root/LICENSE"; } \
    > "$stage/usr/share/doc/healthgate/copyright"
python3 "$root/packaging/deb/from-help.py" man "$stage/usr/bin/healthgate" | gzip -9n > "$stage/usr/share/man/man1/healthgate.1.gz"
python3 "$root/packaging/deb/from-help.py" completion "$stage/usr/bin/healthgate" > "$stage/usr/share/bash-completion/completions/healthgate"
for s in postinst prerm postrm; do install -m 0755 "$root/packaging/deb/$s" "$stage/DEBIAN/$s"; done

# The libraries the binary links, as Debian's packages that hold them.
mkdir -p "$work/src/debian"
printf 'Source: healthgate\n\nPackage: healthgate\nArchitecture: any\n' > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O --warnings=0 "$stage/usr/bin/healthgate" | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "dpkg-shlibdeps found no dependency" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: healthgate
Version: $version
Architecture: $arch
Maintainer: healthgate developers <healthgate@localhost>
Installed-Size: $size
Depends: $depends, passwd
Section: net
Priority: optional
Homepage: https://github.com/healthgate/healthgate
Description: gateway for Apple Health data
 iPhone apps (Syncky Health, Health Auto Export, HealthSync, InfluxDB line
 protocol) post health samples to healthgate. It checks who is sending, writes
 each request durably before it answers, and delivers one canonical sample
 stream through routes to files, webhooks, InfluxDB, Home Assistant over MQTT
 and PostgreSQL, each sink with its own retry queue on disk.
CONTROL
mkdir -p "$out"
deb="$out/healthgate_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
