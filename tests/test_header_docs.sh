#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The header is the manual (docs/ARCHITECTURE.md): every STK_API function in include/stoker.h has
# a doc comment (its own, or the one over its group of declarations) that says which threads may
# call it (there, or in its section's "Thread safety" line), who owns a pointer it returns or a
# handle it creates, and, for a symbol added after 0.1, "since X" with X the release whose
# section of src/stoker.map lists it (test_symbols checks map = exports = header).
# stk-test: normal-only
# stk-test: once (reads include/stoker.h and src/stoker.map of the checkout)
set -u
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
exec "$PY" - "$SRC_DIR/include/stoker.h" "$SRC_DIR/src/stoker.map" <<'PYEOF'
import re, sys
lines = open(sys.argv[1]).read().split('\n')
release = {}
for sec, body in re.findall(r'(STOKER_[0-9.]+)\s*\{(.*?)\}', open(sys.argv[2]).read(), re.S):
    for name in re.findall(r'\b(stk_[a-z0-9_]+);', body):
        release[name] = sec.split('_', 1)[1]
fails, n, section, i = [], 0, '', 0
while i < len(lines):
    line = lines[i]
    if line.startswith('/* -----'):           # a section banner: its text up to the closing rule
        j = i + 1
        while j < len(lines) and not lines[j].startswith(' * -----'):
            j += 1
        section = ' '.join(lines[i + 1:j])
    if line.startswith('STK_API'):
        j = i
        while ';' not in lines[j]:
            j += 1
        decl = ' '.join(lines[i:j + 1])
        name = re.search(r'\b(stk_[a-z0-9_]+)\s*\(', decl).group(1)
        # the comment right above, skipping the declarations of the same group
        k = i - 1
        while k >= 0 and (lines[k].startswith('STK_API') or
                          (lines[k].startswith('    ') and not lines[k].lstrip().startswith(('*', '/*')))):
            k -= 1
        doc = []
        if k >= 0 and lines[k].rstrip().endswith('*/'):
            while k >= 0:
                doc.insert(0, lines[k])
                if lines[k].lstrip().startswith('/*'):
                    break
                k -= 1
        d = re.sub(r'\s+', ' ', ' '.join(doc))
        n += 1
        rel = release.get(name)
        if not d:
            fails.append('%s: no doc comment' % name)
        if rel is None:
            fails.append('%s: not in src/stoker.map' % name)
        elif rel != '0.1' and rel not in re.findall(r'[Ss]ince (0\.\d+)', d):
            fails.append('%s: exported in STOKER_%s, its doc does not say "since %s"' % (name, rel, rel))
        if not re.search(r'[Tt]hread', d + ' ' + section):
            fails.append('%s: neither its doc nor its section says which threads may call it' % name)
        result, params = decl.split(name, 1)
        if '*' in result and not re.search(r'[Oo]wned by|[Ss]tatic (string|text)|valid until|borrowed', d):
            fails.append('%s: returns a pointer; its doc does not say who owns it' % name)
        if name.endswith('_create') and not re.search(r'owned by the caller', d):
            fails.append('%s: creates a handle; its doc does not say the caller owns it' % name)
        i = j
    i += 1
for f in fails:
    print('FAIL:', f)
if n < 50:
    print('FAIL: only %d STK_API functions found: the parser no longer reads the header' % n)
    sys.exit(1)
print('test_header_docs: %d functions, %d problems' % (n, len(fails)))
sys.exit(1 if fails else 0)
PYEOF
