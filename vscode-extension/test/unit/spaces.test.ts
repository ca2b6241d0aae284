import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spaceChoices } from "../../src/extension/spaces";
import * as P from "../../src/shared/protocol";

test("space functions come from the server's Tune-with-this-space lenses", () => {
  const uri = "file:///w/m.py";
  const lenses = [
    { line: 14, command: P.CMD_TUNE, arguments: [{ uri, function: "matmul64" }] },
    { line: 40, command: P.CMD_TUNE, arguments: [{ uri, space: "schedule_b" }] },
    { line: 24, command: P.CMD_TUNE, arguments: [{ uri, space: "schedule_matmul" }] },
    { line: 24, command: P.CMD_TUNE, arguments: [{ uri, space: "schedule_matmul", spaceMode: "union" }] },
    { line: 24, command: P.CMD_SHOW_SEARCH_SPACE, arguments: [{ uri, run: "r1", space: "ignored" }] },
    { line: 30 },
  ];
  assert.deepEqual(spaceChoices(lenses), [{ name: "schedule_matmul", line: 24 }, { name: "schedule_b", line: 40 }]);
  assert.deepEqual(spaceChoices([]), []);
});
