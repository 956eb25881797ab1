#!/usr/bin/env python3
"""The man page (healthgate.1) and the bash completion of healthgate, made from the commands'
own help (`healthgate help`), so they say what the binary does. Usage:
  from-help.py man BINARY > healthgate.1
  from-help.py completion BINARY > healthgate"""
import re
import subprocess
import sys


def help_text(binary):
    return subprocess.run([binary, "help"], check=True, capture_output=True, text=True).stdout


def version(binary):
    out = subprocess.run([binary, "version"], check=True, capture_output=True, text=True).stdout
    m = re.match(r"healthgate (\S+)(?: \(commit (\S+), built (\S+)\))?", out)
    return (m.group(1), m.group(3) or "") if m else ("", "")


def parse(text):
    """(title, [(usage, [description lines])], [(variable, description)])"""
    lines = text.splitlines()
    title = lines[0].split("—", 1)[-1].strip() if lines else "a gateway for Apple Health data"
    commands, environment, section = [], [], None
    for line in lines[1:]:
        if line.strip() in ("usage:", "environment:"):
            section = line.strip()
            continue
        if not line.strip():
            continue
        if section == "usage:":
            m = re.match(r"^  (healthgate \S+.*?)(?:\s{3,}(\S.*))?$", line)
            if m and not line.startswith("   "):
                commands.append((m.group(1).strip(), [m.group(2)] if m.group(2) else []))
            elif commands:
                commands[-1][1].append(line.strip())
        elif section == "environment:":
            m = re.match(r"^  (\S+)\s+(.*)$", line)
            if m:
                environment.append((m.group(1), m.group(2)))
    return title, commands, environment


def roff(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s.startswith((".", "'")) else s


def man(binary):
    title, commands, environment = parse(help_text(binary))
    ver, built = version(binary)
    out = [f'.TH HEALTHGATE 1 "{built}" "healthgate {ver}" "User Commands"',
           ".SH NAME", "healthgate \\- " + roff(title),
           ".SH SYNOPSIS", ".B healthgate", ".I command", "[options]",
           ".SH DESCRIPTION",
           roff("iPhone apps (Syncky Health, Health Auto Export, HealthSync, anything that speaks InfluxDB line "
                "protocol) post health samples to healthgate; it checks who is sending, writes each request "
                "durably before it answers, and delivers one canonical sample stream through routes to sinks "
                "(files, webhooks, InfluxDB, Home Assistant over MQTT, PostgreSQL)."),
           ".SH COMMANDS"]
    for usage, description in commands:
        out += [".TP", ".B " + roff(usage), roff(" ".join(description))]
    out += [".SH ENVIRONMENT"]
    for name, description in environment:
        out += [".TP", ".B " + roff(name), roff(description)]
    out += [".SH EXIT STATUS", "0 ok, 1 a runtime failure, 2 bad usage or a bad config.",
            ".SH FILES", ".TP", ".B /etc/healthgate/healthgate.yaml",
            "the config the service runs with (made on first install with a fresh token and secret)",
            ".TP", ".B /var/lib/healthgate", "the data dir: the journal, each sink's queue, the credentials",
            ".SH SEE ALSO", roff("/usr/share/doc/healthgate/README.md and docs/ beside it; healthgate help COMMAND.")]
    return "\n".join(out) + "\n"


def completion(binary):
    _, commands, _ = parse(help_text(binary))
    flags = {}
    for usage, description in commands:
        name = usage.split()[1]
        found = set(re.findall(r"--[a-z][a-z-]*", usage + " " + " ".join(description)))
        flags.setdefault(name, set()).update(found | {"--help"})
    names = " ".join(sorted(flags))
    cases = "\n".join(f'        {n}) opts="{" ".join(sorted(f))}" ;;' for n, f in sorted(flags.items()) if n != "help")
    return f"""# bash completion for healthgate (made from `healthgate help`)
_healthgate() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} opts
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "{names}" -- "$cur"))
        return
    fi
    case "$prev" in
        --config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    case "${{COMP_WORDS[1]}}" in
{cases}
        help) COMPREPLY=($(compgen -W "{names}" -- "$cur")); return ;;
        *) opts="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -F _healthgate healthgate
"""


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("man", "completion"):
        sys.exit(__doc__)
    sys.stdout.write(man(sys.argv[2]) if sys.argv[1] == "man" else completion(sys.argv[2]))
