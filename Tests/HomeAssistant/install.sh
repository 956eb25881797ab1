#!/bin/sh
# Installs Home Assistant 2024.3.3 (the newest for Python 3.11) and the requirements of the
# integrations the test starts into the venv $1, unless it is there already. Kept outside the
# clone (see the Makefile), so it is made once per machine.
set -e
venv="$1"
here="$(dirname "$0")"
if [ -f "$venv/.complete" ]; then exit 0; fi
echo "installing Home Assistant 2024.3.3 into $venv (once; about 2 minutes)"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "homeassistant==2024.3.3" "josepy<2"
"$venv/bin/python" "$here/requirements.py" > "$venv/requirements.txt"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$venv/requirements.txt"
touch "$venv/.complete"
