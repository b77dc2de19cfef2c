# Independent computation of fingerprint rules version 2 (fingerprint-v2.md) for simple inputs (strings,
# integers, objects; decimal strings in amount fields): python3 fingerprint-v2-vectors.py > fingerprint-v2-vectors.json
import hashlib, json, struct, copy
from decimal import Decimal

TAG1, TAG2 = b"opledger/fingerprint/v1", b"opledger/fingerprint/v2"
ORDER = ["amount", "recipient", "target", "body", "upstream", "other", "unlisted"]

def lp(b): return struct.pack(">I", len(b)) + b

def canon(v, amount):
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canon(v[k], amount) for k in sorted(v, key=lambda k: k.encode())) + "}"
    if isinstance(v, list):
        return "[" + ",".join(canon(x, amount) for x in v) + "]"
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str) and amount:
        d = Decimal(v).normalize()
        return format(d, "f")
    return json.dumps(v, ensure_ascii=False)

def lookup(req, path):
    cur = req
    for k, seg in enumerate(path.split(".")):
        if not isinstance(cur, dict):
            return ("blocked", k, cur)
        if seg not in cur:
            return ("absent",)
        cur = cur[seg]
    return ("present", cur)

def hash_category(tag, cat, paths, whole, req):
    amount = cat == "amount"
    paths = sorted(paths, key=lambda p: p.encode())
    h = lp(tag) + lp(cat.encode()) + struct.pack(">I", len(paths) + (whole is not None))
    if whole is not None:
        h += lp(b"") + b"\x01" + lp(canon(whole, amount).encode())
    for p in paths:
        h += lp(p.encode())
        r = lookup(req, p)
        if r[0] == "absent": h += b"\x00"
        elif r[0] == "present": h += b"\x01" + lp(canon(r[1], amount).encode())
        else: h += b"\x02" + struct.pack(">I", r[1]) + lp(canon(r[2], amount).encode())
    return hashlib.sha256(h).hexdigest()

def remove(m, segs):
    if len(segs) == 1:
        m.pop(segs[0], None); return
    child = m.get(segs[0])
    if isinstance(child, dict):
        had = len(child) > 0
        remove(child, segs[1:])
        if had and not child: del m[segs[0]]

def v2(spec, ignore, req, upstream=None):
    parts = {}
    for cat, paths in spec.items():
        if paths:
            parts[cat] = hash_category(TAG1, cat, paths, None, req)
    rest = copy.deepcopy(req)
    for p in [p for ps in spec.values() for p in ps] + ignore:
        remove(rest, p.split("."))
    parts["unlisted"] = hash_category(TAG2, "unlisted", [], rest, req)
    if upstream is not None:
        parts["upstream"] = hashlib.sha256(lp(TAG1) + lp(b"upstream") + lp(upstream.encode())).hexdigest()
    return parts

cases = [
  ("payment_with_ignored_and_unlisted_fields", {"amount": ["amount"], "recipient": ["customer"], "other": ["currency"]}, ["trace_id"], [],
   {"amount": "10.50", "currency": "EUR", "customer": "c-1", "trace_id": "t-1", "note": "x"}, None),
  ("amount_spelling_is_normalised", {"amount": ["amount"], "recipient": ["customer"], "other": ["currency"]}, ["trace_id"], [],
   {"amount": "1.050e1", "currency": "EUR", "customer": "c-1", "trace_id": "t-2", "note": "x"}, None),
  ("whole_request_when_nothing_is_listed", {}, [], [], {"b": 1, "a": {"c": "x"}}, None),
  ("sibling_of_a_listed_nested_field_counts_as_other", {"recipient": ["to.email"]}, [], [], {"to": {"email": "a@example.com", "name": "A"}}, None),
  ("object_emptied_by_removal_is_removed", {"recipient": ["to.email"]}, [], [], {"to": {"email": "a@example.com"}}, None),
  ("empty_request_without_listed_fields", {"recipient": ["to.email"]}, [], [], {}, None),
  ("upstream_reference", {"target": ["id"]}, [], ["id"], {"id": "r-1"}, "ref-9"),
]
out = {"version": 2, "note": "Computed independently of the Rust code by fingerprint-v2-vectors.py (python3 fingerprint-v2-vectors.py > fingerprint-v2-vectors.json). Each vector: spec (category -> paths), ignore, required, request, optional upstream_ref, and either the expected parts (category -> hex) or the expected error code.", "vectors": []}
for name, spec, ignore, required, req, up in cases:
    v = {"name": name, "spec": spec, "ignore": ignore, "required": required, "request": req}
    if up is not None: v["upstream_ref"] = up
    v["parts"] = dict(sorted(v2(spec, ignore, req, up).items(), key=lambda kv: ORDER.index(kv[0])))
    out["vectors"].append(v)
out["vectors"] += [
  {"name": "amount_that_is_no_decimal", "spec": {"amount": ["amount"]}, "ignore": [], "required": [], "request": {"amount": "ten"}, "error": "amount_not_decimal"},
  {"name": "amount_that_is_null", "spec": {"amount": ["amount"]}, "ignore": [], "required": [], "request": {"amount": None}, "error": "amount_not_decimal"},
  {"name": "required_field_missing", "spec": {"amount": ["amount"]}, "ignore": [], "required": ["customer"], "request": {"amount": 1}, "error": "required_field_missing"},
  {"name": "required_field_null", "spec": {}, "ignore": [], "required": ["customer"], "request": {"customer": None}, "error": "required_field_missing"},
]
print(json.dumps(out, indent=2, ensure_ascii=False))
