#!/usr/bin/env bash
# Fails when the modules of one crate import each other in a circle, and names the circle.
#
# Usage: scripts/check-module-cycles.sh [--edges] [CRATE…]     # default: every crate under crates/
#        --edges also prints every edge between siblings (who uses whom), circle or not.
#
# For each crate root (src/lib.rs, src/main.rs) the script reads the module tree from the `mod` lines,
# then every reference a module's code makes to another module of the same crate: `use crate::…`,
# `use super::…`, `use self::…` (nested `{…}` trees expanded) and paths written inline (`crate::a::f()`,
# `super::super::x`). A reference points at the deepest module its path names (`crate::scenario::Setup` →
# `scenario`, even when `Setup` lives in a submodule and is re-exported).
#
# What counts — the tree is not a circle, siblings that lean on each other are:
# - a parent declaring a child (`mod x;`) is not an import, and neither is a parent using its child's items;
# - a child using its parent or any ancestor (`use super::*`, `crate::Error` from the root) is the normal
#   tree shape and is not counted;
# - every other reference is lifted to the two siblings under the closest common ancestor: `a/x.rs` using
#   `b/y.rs` is an edge a → b between the siblings a and b; `a/x.rs` using `a/y.rs` an edge x → y.
# A strongly connected set of siblings is a circle: reported with one path through it and, for each edge,
# the file and line that makes it.
#
# Known circles are allowed by name in ALLOWED_CIRCLES below, one entry per circle: `crate:module,module…`,
# the strongly connected set of siblings exactly as reported. An allowed circle is printed but does not fail;
# an entry whose circle is gone fails, so that the list only ever shrinks. Each entry says when it goes.
#
# Not seen: names brought in through a glob of the parent's re-exports (`use super::*` where the parent
# has `pub use sibling::Thing`), macros' expansions, `#[path]`. Code in `#[cfg(test)]` modules is left out:
# tests sit above the code they test and may use any module. Comments and string literals are ignored.
set -euo pipefail
cd "$(dirname "$0")/.."

# Add an entry only with the issue that will cut it.
# - corral-group:jobs,watch — the Entity Manager's use jobs hand a watch its first round (`JobCx` carries
#   `&mut Watches`) and a watch starts its rounds as jobs (`Jobs::start`, `member_result`): the two parts
#   met through `use super::*` until issue 42's split made the imports explicit and showed it. It goes with
#   issue 42's next step: the watch's rounds asked through the jobs' context only (a `Rounds` trait the
#   watch implements), so that watch.rs names nothing of jobs/.
ALLOWED_CIRCLES='corral-group:jobs,watch'
export ALLOWED_CIRCLES

python3 - "$@" <<'PY'
import os, re, sys
from collections import defaultdict

def strip(text):
    """Code with comments, string and char literals blanked (newlines kept for line numbers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            i = j
        elif text.startswith('/*', i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith('/*', i):
                    depth, i = depth + 1, i + 2
                elif text.startswith('*/', i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == '\n':
                        out.append('\n')
                    i += 1
        elif re.match(r'b?r(#*)"', text[i:i + 40]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'b?r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + '\n' * text.count('\n', i, j))
            i = j
        elif c == '"' or (c == 'b' and text.startswith('b"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_'))):
            j = i + (2 if c == 'b' else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            j += 1
            out.append('""' + '\n' * text.count('\n', i, j))
            i = j
        elif c == "'":
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)

def drop_test_modules(code):
    """Blanks `#[cfg(test)] … mod name { … }` blocks (newlines kept)."""
    pat = re.compile(r'#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{')
    while True:
        m = pat.search(code)
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {'{': 1, '}': -1}.get(code[j], 0)
            j += 1
        code = code[:m.start()] + re.sub(r'[^\n]', ' ', code[m.start():j]) + code[j:]

def split_top(s, sep=','):
    parts, depth, cur = [], 0, ''
    for ch in s:
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]

def expand(tree, prefix=()):
    """`a::{b, c::{d, e}}` → [a::b, a::c::d, a::c::e] as tuples of segments."""
    tree = re.sub(r'\s+as\s+\w+', '', tree)
    tree = re.sub(r'\s+', '', tree)
    m = re.match(r'^((?:\w+::)*)\{(.*)\}$', tree)
    if m:
        head = tuple(s for s in m.group(1).split('::') if s)
        out = []
        for part in split_top(m.group(2)):
            out += expand(part, prefix + head)
        return out
    return [prefix + tuple(s for s in tree.split('::') if s)]

class Crate:
    def __init__(self, name, root):
        self.name, self.root = name, root
        self.modules = {}     # path tuple -> file
        self.refs = []        # (from module, to module, file, line, text)
        self.walk((), root, os.path.dirname(root), True)

    def walk(self, path, file, folder, owns_folder):
        self.modules[path] = file
        with open(file, encoding='utf-8') as f:
            code = drop_test_modules(strip(f.read()))
        self.codes = getattr(self, 'codes', {})
        self.codes[path] = code
        base = folder if owns_folder else os.path.join(folder, os.path.splitext(os.path.basename(file))[0])
        for m in re.finditer(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', code, re.M):
            name = m.group(1)
            for cand, owns in ((os.path.join(base, name + '.rs'), False), (os.path.join(base, name, 'mod.rs'), True)):
                if os.path.exists(cand):
                    self.walk(path + (name,), cand, os.path.dirname(cand) if owns else base, owns)
                    break

    def target(self, here, segs):
        """The deepest module a path names, or None (an extern crate, a local item)."""
        if not segs:
            return None
        if segs[0] == 'crate':
            cur, rest = (), segs[1:]
        elif segs[0] in ('super', 'self'):
            cur, rest = here, segs
            while rest and rest[0] in ('super', 'self'):
                if rest[0] == 'super':
                    if not cur:
                        return None
                    cur = cur[:-1]
                rest = rest[1:]
        elif here + (segs[0],) in self.modules:
            cur, rest = here, segs
        else:
            return None
        for s in rest:
            if cur + (s,) in self.modules:
                cur = cur + (s,)
            else:
                break
        return cur

    def scan(self):
        for here, code in self.codes.items():
            file = self.modules[here]
            for m in re.finditer(r'\buse\s+([^;]+);', code):
                line = code.count('\n', 0, m.start()) + 1
                for segs in expand(m.group(1)):
                    t = self.target(here, segs)
                    if t is not None:
                        self.refs.append((here, t, file, line, 'use ' + '::'.join(segs)))
            for m in re.finditer(r'(?<![\w:])((?:crate|super|self)(?:::\w+)+)', code):
                if re.search(r'\buse\s+[^;]*$', code[max(0, m.start() - 300):m.start()]):
                    continue  # inside a use statement: counted above
                line = code.count('\n', 0, m.start()) + 1
                segs = tuple(m.group(1).split('::'))
                t = self.target(here, segs)
                if t is not None:
                    self.refs.append((here, t, file, line, m.group(1)))

    def edges(self):
        """Sibling edges: (parent, a, b) -> [witness]."""
        out = defaultdict(list)
        for src, dst, file, line, text in self.refs:
            k = 0
            while k < min(len(src), len(dst)) and src[k] == dst[k]:
                k += 1
            if k == len(dst) or k == len(src):
                continue  # dst is an ancestor of src (the tree), or src a parent of dst (declares/uses its child)
            parent, a, b = src[:k], src[k], dst[k]
            out[(parent, a, b)].append((file, line, text))
        return out

def sccs(nodes, adj):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)
    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out

def cycle_through(start, comp, adj):
    """A shortest path start → … → start inside comp."""
    from collections import deque
    prev, q = {start: None}, deque([start])
    while q:
        v = q.popleft()
        for w in sorted(adj.get(v, ())):
            if w not in comp:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                q.append(w)
    return [start]

def main(args):
    show_edges = '--edges' in args
    args = [a for a in args if a != '--edges']
    crates = sorted(d for d in os.listdir('crates') if os.path.isdir(os.path.join('crates', d)))
    if args:
        crates = [c for c in crates if c in args]
    allowed = set()
    for entry in os.environ.get('ALLOWED_CIRCLES', '').split():
        crate, _, mods = entry.partition(':')
        allowed.add((crate, tuple(sorted(mods.split(',')))))
    seen = set()
    failed = False
    for name in crates:
        for root in ('lib.rs', 'main.rs'):
            path = os.path.join('crates', name, 'src', root)
            if not os.path.exists(path):
                continue
            c = Crate(name, path)
            c.scan()
            edges = c.edges()
            by_parent = defaultdict(lambda: defaultdict(set))
            for (parent, a, b) in edges:
                by_parent[parent][a].add(b)
            circles = []
            for parent, adj in sorted(by_parent.items()):
                nodes = set(adj) | {b for bs in adj.values() for b in bs}
                for comp in sccs(nodes, adj):
                    if len(comp) > 1:
                        circles.append((parent, sorted(comp), adj))
            label = f'{name} ({root})'
            if show_edges:
                for parent, adj in sorted(by_parent.items()):
                    where = '::'.join(('crate',) + parent)
                    for a in sorted(adj):
                        print(f'{label}: {where}: {a} → {", ".join(sorted(adj[a]))}')
            known = [x for x in circles if (name, tuple(x[1])) in allowed]
            for parent, comp, adj in known:
                seen.add((name, tuple(comp)))
                print(f'{label}: known circle among {", ".join(comp)} (allowed in ALLOWED_CIRCLES until it is cut)')
            circles = [x for x in circles if (name, tuple(x[1])) not in allowed]
            if not circles:
                if not known:
                    print(f'{label}: no module circle ({len(c.modules)} modules)')
                continue
            failed = True
            for parent, comp, adj in circles:
                where = '::'.join(('crate',) + parent)
                loop = cycle_through(comp[0], set(comp), adj)
                print(f'{label}: circle among the children of {where}: {" → ".join(loop)}'
                      + (f' (strongly connected: {", ".join(comp)})' if len(comp) > len(loop) - 1 else ''))
                for a, b in zip(loop, loop[1:]):
                    lines = {}
                    for file, line, text in edges[(parent, a, b)]:
                        lines.setdefault((file, line), text)
                    for (file, line), text in list(lines.items())[:2]:
                        print(f'    {a} → {b}: {file}:{line}: {text}')
                    if len(lines) > 2:
                        print(f'    {a} → {b}: … and {len(lines) - 2} more lines')
    for crate, comp in sorted(allowed - seen):
        if not args or crate in args:
            print(f'{crate}: the allowed circle among {", ".join(comp)} is gone: remove it from ALLOWED_CIRCLES')
            failed = True
    return 1 if failed else 0

sys.exit(main(sys.argv[1:]))
PY
