#!/usr/bin/env python3
"""Check every relative markdown link in README.md, docs/*.md and any further markdown
files named after the root: the file exists, and a #anchor (when the target is markdown)
matches a heading's GitHub slug. The README links into docs/ for its reference parts, so a
page renamed or a heading reworded must not leave a reader at a dead link.

    python3 scripts/check-doc-links.py . $(git ls-files '*.md')
"""
import re, sys, os, glob
root = sys.argv[1] if len(sys.argv) > 1 else '.'
def slug(h):
    h = h.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)   # GitHub: drop punctuation but keep - _ and spaces
    return h.replace(' ', '-')
def anchors(path):
    out = set(); fence = False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'): fence = not fence; continue
        if fence: continue
        m = re.match(r'^(#{1,6})\s+(.*?)\s*$', line)
        if m: out.add(slug(m.group(2)))
    return out
bad = 0; n = 0
files = [os.path.join(root, 'README.md')] + sorted(glob.glob(os.path.join(root, 'docs', '*.md'))) + [os.path.join(root, f) for f in sys.argv[2:] if f not in ('README.md',) and not f.startswith('docs/')]
for f in files:
    text = open(f, encoding='utf-8').read()
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    for m in re.finditer(r'\]\(([^)\s]+)\)', text):
        link = m.group(1)
        if re.match(r'^[a-z]+:', link): continue
        n += 1
        path, _, anchor = link.partition('#')
        target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(target):
            print(f'{os.path.relpath(f, root)}: missing file {link}'); bad += 1; continue
        if anchor and target.endswith('.md') and anchor not in anchors(target):
            print(f'{os.path.relpath(f, root)}: missing anchor {link}'); bad += 1
print(f'{n} relative links checked, {bad} broken')
sys.exit(1 if bad else 0)
