// The TypeScript protocol mirror against asight_lsp/protocol.py (names, values, TypedDict keys).
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as P from "../../src/shared/protocol";

const ext = path.resolve(__dirname, "..", "..", "..");
const python = process.env.ASIGHT_PYTHON || "python3";
const dump = JSON.parse(execFileSync(python, [path.join(ext, "scripts", "dump-protocol.py")], { encoding: "utf8" })) as {
  constants: Record<string, unknown>;
  typedDicts: Record<string, string[]>;
};
const ts = P as unknown as Record<string, unknown>;
const norm = (v: unknown) => (Array.isArray(v) ? [...v] : v);

test("every Python constant is mirrored with the same value", () => {
  assert.ok(Object.keys(dump.constants).length > 30, "the dump found the constants");
  for (const [name, value] of Object.entries(dump.constants)) {
    assert.ok(name in ts, `protocol.ts lacks ${name}`);
    const mine = name === "TRUSTED_COMMANDS" ? [...(ts[name] as string[])].sort() : norm(ts[name]);
    assert.deepEqual(mine, value, `${name} differs`);
  }
});

test("every UPPER_CASE constant of the mirror exists in Python (no TypeScript-only protocol names)", () => {
  const tsOnly = new Set(["TYPED_DICTS"]);
  for (const name of Object.keys(ts)) {
    if (!/^[A-Z][A-Z0-9_]*$/.test(name) || name.endsWith("_KEYS") || tsOnly.has(name)) continue;
    assert.ok(name in dump.constants, `${name} is not in protocol.py`);
  }
});

test("payload shapes: each TypedDict's keys equal the mirror's key list", () => {
  const mine = P.TYPED_DICTS as Record<string, readonly string[]>;
  assert.deepEqual(Object.keys(mine).sort(), Object.keys(dump.typedDicts).sort());
  for (const [name, keys] of Object.entries(dump.typedDicts)) {
    assert.deepEqual([...mine[name]].sort(), [...keys].sort(), `${name} keys differ`);
  }
});

test("isUnavailable recognises the server's unavailable payload", () => {
  assert.equal(P.isUnavailable({ schema: P.SCHEMA_SEARCH_SPACE, status: P.STATUS_UNAVAILABLE, message: "no run" }), true);
  assert.equal(P.isUnavailable({ schema: P.SCHEMA_SEARCH_SPACE, status: P.STATUS_OK }), false);
  assert.equal(P.isUnavailable(null), false);
});
