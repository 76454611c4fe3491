#!/usr/bin/env python3
"""List fastmsg's public API from rustdoc JSON: every item reachable from the
crate root through public modules and re-exports, one `kind path` a line."""
import json, sys
doc = json.load(open(sys.argv[1]))
idx = doc["index"]; root = doc["root"]
out = set(); ids = set()
def kind(it):
    return next(iter(it["inner"])) if isinstance(it["inner"], dict) else it["inner"]
def walk(iid, path, seen):
    it = idx.get(str(iid)) or idx.get(iid)
    if it is None: return
    k = kind(it)
    if it.get("attrs") and any('doc(hidden)' in str(a) or 'hidden' in str(a) for a in it["attrs"]): return
    if k == "use":
        u = it["inner"]["use"]
        tgt = u.get("id")
        if tgt is None:
            out.add(f"use {'::'.join(path+[u['name']])} (external {u['source']})"); return
        if u.get("is_glob"):
            t = idx.get(str(tgt))
            if t and kind(t)=="module":
                for c in t["inner"]["module"]["items"]: walk(c, path, seen)
            return
        walk_named(tgt, path, u["name"], seen); return
    walk_named(iid, path[:-1], path[-1], seen, it) if False else None
def walk_named(iid, parent, name, seen, it=None):
    it = it or idx.get(str(iid))
    if it is None:
        out.add(f"reexport {'::'.join(parent+[name])}"); return
    if it.get("attrs") and any('hidden' in str(a) for a in it["attrs"]): return
    k = kind(it); p = parent+[name]
    if it.get("visibility") not in ("public", None) and k!="use": return
    out.add(f"{k} {'::'.join(p)}")
    if k != "module": ids.add(iid)
    if k == "module":
        if (iid, tuple(p)) in seen: return
        seen.add((iid, tuple(p)))
        for c in it["inner"]["module"]["items"]:
            c_it = idx.get(str(c))
            if c_it is None: continue
            if kind(c_it) == "use": walk(c, p, seen)
            elif c_it.get("name"): walk_named(c, p, c_it["name"], seen)
    elif k in ("struct","enum","trait","union"):
        inner = it["inner"][k]
        for impl in inner.get("impls", []):
            im = idx.get(str(impl))
            if not im: continue
            imi = im["inner"]["impl"]
            if imi.get("trait") is not None or imi.get("synthetic") or imi.get("blanket_impl"): continue
            for m in imi["items"]:
                mi = idx.get(str(m))
                if mi and mi.get("visibility")=="public" and mi.get("name"):
                    out.add(f"{'method' if kind(mi)=='function' else kind(mi)} {'::'.join(p)}::{mi['name']}")
        if k=="enum":
            for v in inner.get("variants", []):
                vi = idx.get(str(v))
                if vi: out.add(f"variant {'::'.join(p)}::{vi['name']}")
        if k=="trait":
            for m in inner.get("items", []):
                mi = idx.get(str(m))
                if mi: out.add(f"trait_item {'::'.join(p)}::{mi['name']}")
walk_named(root, [], "fastmsg", set())
lines = sorted(out)
from collections import Counter
c = Counter(l.split()[0] for l in lines)
print(f"# {len(lines)} items: " + ", ".join(f"{k} {v}" for k,v in sorted(c.items())))
top = Counter(l.split()[0] for l in lines if l.split()[0] in ("module","struct","enum","trait","function","constant","static","type_alias","macro"))
print(f"# {sum(top.values())} paths to modules, types, traits, functions, constants ({len(ids)} distinct items; the rest are methods, variants, trait items): " + ", ".join(f"{k} {v}" for k,v in sorted(top.items())))
for l in lines: print(l)
