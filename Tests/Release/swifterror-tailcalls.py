#!/usr/bin/env python3
"""Finds, in an optimized x86-64 build, functions that may return a spurious Swift error.

A Swift function that throws returns its error in r12 (swifterror) and must leave r12 as it
found it (zero) when it returns normally. LLVM may end such a function with a tail call to
memmove, memcpy or memset (which keep r12 as they find it) without putting r12 back first
(swiftlang/swift#90477, llvm/llvm-project#214590): when the function used r12 for something
else, its caller then sees a "thrown" error made of whatever r12 held. That is how the point
index's seal threw garbage and aborted the release build (issue 45).

Each function runs from its frame prologue (`push %rbp; mov %rsp,%rbp`) to the next one's, so
an unnamed function that objdump lists under the last symbol is a function of its own.
A function is reported when it saves r12 into its frame (`mov %r12,-N(%rbp)`: the swifterror
pattern, not a plain `push %r12`), writes r12 elsewhere, and tail-jumps to a mem* call with no
write of r12 between its last other jump or label and that jump.
Usage: swifterror-tailcalls.py BINARY [RUNTIME.so…]  (exit 1 and a list when any is found)
With the Swift runtime linked in (--static-swift-stdlib), the binary also holds the toolchain's
own functions: one that the toolchain's shared runtime (RUNTIME.so, what a dynamic build
loads) holds with the same finding is the toolchain's, named but not failed on.
"""
import re
import subprocess
import sys


def findings(binary):
    """The functions of `binary` with the pattern, and how many functions it has."""
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True, check=True).stdout
    return scan(asm)


def scan(asm):
    functions = []
    current = None
    for line in asm.split("\n"):
        m = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
        if m:
            current = (m.group(2), [])
            functions.append(current)
        elif current is not None and line.strip():
            ins = " ".join(line.split(":", 1)[-1].split())
            # A function without a symbol of its own (an outlined copy, a thunk) follows the last
            # named one: its frame prologue starts it, so its jumps are not taken for that one's.
            if ins == "mov %rsp,%rbp" and len(current[1]) > 1 and current[1][-1] == "push %rbp":
                current[1].pop()
                current = (current[0] + " (the unnamed function after it)", ["push %rbp"])
                functions.append(current)
            current[1].append(ins)

    save = re.compile(r"^mov\s+%r12,-0x[0-9a-f]+\(%rbp\)$")
    writes = re.compile(r"(^(mov|movzbl|movzwl|lea|add|sub|xor|and|or|shl|shr|sar|imul|inc|dec|pop)\w*\s.*,%r12d?$)|(^pop\s+%r12$)")
    tail = re.compile(r"^jmp\s+[0-9a-f]+ <(memmove|memcpy|memset)(@plt)?>")
    boundary = re.compile(r"^(j\w+|ret|ud2)\b")
    found = []
    for name, body in functions:
        if not any(save.match(i) for i in body):
            continue
        if not any(writes.search(i) for i in body):
            continue
        for k, ins in enumerate(body):
            if not tail.match(ins):
                continue
            j = k - 1
            restored = False
            while j >= 0 and not boundary.match(body[j]):
                if writes.search(body[j]):
                    restored = True
                    break
                j -= 1
            if not restored:
                found.append(name)
                break
    return found, len(functions)


binary = sys.argv[1]
found, count = findings(binary)
toolchain = set()
for runtime in sys.argv[2:]:
    toolchain |= set(findings(runtime)[0])
theirs = [f for f in found if f in toolchain]
found = [f for f in found if f not in toolchain]


def demangled(names):
    return subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(names), capture_output=True, text=True).stdout.strip().split("\n")


if theirs:
    print(f"{binary}: {len(theirs)} function(s) of the Swift runtime show the pattern in the toolchain's own shared runtime too "
          "(not ours; a dynamic build runs the same code):")
    for n in demangled(theirs):
        print("  " + n)
if found:
    print(f"{binary}: {len(found)} function(s) may return a spurious Swift error (a tail call to mem* with r12 not restored):")
    for n in demangled(found):
        print("  " + n)
    sys.exit(1)
print(f"{binary}: no throwing function tail-calls mem* with r12 clobbered ({count} functions read)")
