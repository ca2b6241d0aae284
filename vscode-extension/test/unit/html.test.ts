import * as crypto from "node:crypto";
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { contentSecurityPolicy, escapeHtml, makeNonce, panelHtml } from "../../src/extension/html";

test("the CSP allows nothing inline and nothing remote", () => {
  const csp = contentSecurityPolicy("https://x.vscode-cdn.net", "abc");
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'nonce-abc'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*|https?:(?!\/\/x\.vscode-cdn\.net)/);
});

test("the shell carries the nonce on its only script and stylesheet, and escapes what it prints", () => {
  const html = panelHtml({ cspSource: "vscode-resource:", nonce: "N0nce", scriptUri: "vscode-resource:/m.js?a=1&b=2",
    styleUri: "vscode-resource:/m.css", kind: "searchSpace", title: "<script>alert(1)</script>" });
  assert.equal((html.match(/<script/g) ?? []).length, 1);
  assert.match(html, /<script nonce="N0nce" src="vscode-resource:\/m.js\?a=1&amp;b=2"><\/script>/);
  assert.match(html, /<link rel="stylesheet" nonce="N0nce"/);
  assert.match(html, /<title>&lt;script&gt;alert\(1\)&lt;\/script&gt;<\/title>/);
  assert.doesNotMatch(html, /style="/);
  assert.equal(escapeHtml(`<a href="x" onclick='y'>&</a>`), "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
});

test("nonces are fresh base64 of 16 random bytes", () => {
  const a = makeNonce((n) => crypto.randomBytes(n)), b = makeNonce((n) => crypto.randomBytes(n));
  assert.notEqual(a, b);
  assert.equal(Buffer.from(a, "base64").length, 16);
});
