#!/bin/bash
# The .deb as a Debian user meets it, in a fresh Debian 12 root made by debootstrap from Debian's
# packages (no Swift in it): apt installs the package and the libraries it depends on; check
# passes; serve, run as the package's user, takes a signed Syncky delivery into its archive; apt
# upgrades to a newer build (config, user and data kept); remove keeps config and data; purge
# takes the config too. Needs root (chroot, mount) and Debian's mirror.
#   Tests/Deb/run.sh OLD.deb NEW.deb
# The bootstrapped root is kept as a tarball in ~/.cache/healthgate (HEALTHGATE_DEB_CACHE) so a
# second run does not download it again.
set -euo pipefail
old=$1 new=$2
cache=${HEALTHGATE_DEB_CACHE:-$HOME/.cache/healthgate}/bookworm-minbase.tar
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$(mktemp -d "${TMPDIR:-/tmp}/deb-test.XXXXXX")
root=$work/root
serve_pid=
cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
    umount -l "$root/proc" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "deb test: $*" >&2; [ -f "$work/serve.log" ] && tail -20 "$work/serve.log" >&2; exit 1; }
say() { echo "deb test: $*"; }

if [ ! -s "$cache" ]; then
    say "making a Debian 12 root with debootstrap (once; kept in $cache)"
    mkdir -p "$(dirname "$cache")" "$work/fresh"
    debootstrap --variant=minbase bookworm "$work/fresh" "$mirror" > "$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap failed"; }
    tar -C "$work/fresh" -cf "$cache.part" . && mv "$cache.part" "$cache"
    rm -rf "$work/fresh"
fi
mkdir -p "$root"
tar -C "$root" -xf "$cache"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }
[ ! -e "$root/usr/bin/swift" ] && ! ls "$root"/usr/lib/*/libswiftCore.so >/dev/null 2>&1 || fail "the root has Swift"

cp "$old" "$root/tmp/old.deb"
cp "$new" "$root/tmp/new.deb"
in_root apt-get update -qq > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "apt-get update failed"; }
in_root apt-get install -y -qq /tmp/old.deb > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "apt could not install the .deb"; }
say "installed $(in_root dpkg-query -W -f='${Package} ${Version}' healthgate) with its dependencies"
in_root getent passwd healthgate | grep -q ':/var/lib/healthgate:' || fail "no healthgate user"
perm=$(in_root stat -c "%U:%G %a" /etc/healthgate/healthgate.yaml)
[ "$perm" = "root:healthgate 640" ] || fail "the config is $perm, not root:healthgate 640"
[ "$(in_root stat -c "%U %a" /var/lib/healthgate)" = "healthgate 700" ] || fail "/var/lib/healthgate is not the user's, 0700"
in_root healthgate version | grep -q '^healthgate ' || fail "healthgate version"
man_page=$(zcat "$root/usr/share/man/man1/healthgate.1.gz")
grep -q '^\.B healthgate serve' <<< "$man_page" || fail "the man page has no serve"
grep -q 'complete -F _healthgate healthgate' "$root/usr/share/bash-completion/completions/healthgate" || fail "no bash completion"

# check, as the service user, of the config made on install.
chroot --userspec=healthgate:healthgate "$root" /usr/bin/env -i PATH=/usr/bin:/bin \
    /usr/bin/healthgate check --config /etc/healthgate/healthgate.yaml > "$work/check.log" 2>&1 \
    || { cat "$work/check.log" >&2; fail "check failed"; }
grep -q 'config /etc/healthgate/healthgate.yaml: ok' "$work/check.log" || fail "check did not say ok"

# serve, as the service user, on a free loopback port.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "s/^listen: .*/listen: \"127.0.0.1:$port\"/" "$root/etc/healthgate/healthgate.yaml"
chroot --userspec=healthgate:healthgate "$root" /usr/bin/env -i PATH=/usr/bin:/bin \
    /usr/bin/healthgate serve --config /etc/healthgate/healthgate.yaml > "$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null || fail "serve does not answer /healthz"

config=$root/etc/healthgate/healthgate.yaml
token=$(sed -n 's/.*token: "\(hg_[^"]*\)".*/\1/p' "$config" | head -1)
secret=$(sed -n 's/.*secret: "\(whsec_[^"]*\)".*/\1/p' "$config" | head -1)
[ -n "$token" ] && [ -n "$secret" ] || fail "no token or secret in the config made on install"
delivery=$(cat /proc/sys/kernel/random/uuid)
uuid=5E1D0000-0000-4000-8000-0000000000DE
body='{"v":1,"type":"sync","device":"d_debtest","samples":[{"uuid":"'$uuid'","type":"steps","value":412,"unit":"count","start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:59Z"}],"deleted":[],"acks":[],"more":false,"delivery":{"destination":"wh_debtest","id":"'$delivery'","index":0,"count":1,"sent_at":"2026-10-14T07:05:00Z"}}'
t=$(date +%s)
signature=$(printf '%s.%s' "$t" "$body" | openssl dgst -sha256 -hmac "$secret" -hex | sed 's/^.*= //')
status=$(curl -s -o "$work/answer" -w '%{http_code}' -X POST "http://127.0.0.1:$port/syncky" \
    -H "Authorization: Bearer $token" -H "Content-Type: application/json" -H "X-Syncky-Format: native" \
    -H "X-Syncky-Delivery: $delivery" -H "X-Syncky-Timestamp: $t" -H "X-Syncky-Signature: v1=$signature" \
    --data-binary "$body")
[ "$status" = 200 ] || fail "the delivery was answered $status: $(cat "$work/answer")"
archive=$root/var/lib/healthgate/archive/d_debtest/2026-10-14.ndjson
for _ in $(seq 100); do grep -qs "$uuid" "$archive" && break; sleep 0.1; done
grep -qs "\"uuid\":\"$uuid\"" "$archive" || fail "the sample is not in $archive"
say "serve took a signed Syncky delivery into the archive"
kill -TERM "$serve_pid"; wait "$serve_pid" || true; serve_pid=

# Upgrade: a newer build replaces the binary, keeps the config, the user and the data.
before=$(md5sum < "$config")
in_root apt-get install -y -qq /tmp/new.deb > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "the upgrade failed"; }
newer=$(dpkg-deb -f "$new" Version)
[ "$(in_root dpkg-query -W -f='${Version}' healthgate)" = "$newer" ] || fail "not upgraded to $newer"
[ "$(md5sum < "$config")" = "$before" ] || fail "the upgrade changed the config"
grep -qs "$uuid" "$archive" || fail "the upgrade lost the data"
say "upgraded to $newer; config and data kept"

# remove: the program goes, config and data stay; purge: the config goes, the data stays.
in_root apt-get remove -y -qq healthgate > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "remove failed"; }
[ ! -e "$root/usr/bin/healthgate" ] && [ ! -e "$root/lib/systemd/system/healthgate.service" ] || fail "remove left the program"
[ -e "$config" ] && grep -qs "$uuid" "$archive" || fail "remove took the config or the data"
in_root apt-get purge -y -qq healthgate > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "purge failed"; }
[ ! -e "$root/etc/healthgate" ] || fail "purge left /etc/healthgate"
grep -qs "$uuid" "$archive" || fail "purge took the data"
say "removed (config and data kept), purged (data kept): ok"
