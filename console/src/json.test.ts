import { test } from "node:test";
import assert from "node:assert/strict";
import { checkObject } from "./json";
import { list } from "./query";

test("checkObject keeps an object's bytes", () => {
  const r = checkObject("data", ' {"a": 1} ', false);
  assert.ok(r.ok);
  assert.equal(new TextDecoder().decode(r.bytes), '{"a": 1}');
});

test("checkObject refuses with the parser's message", () => {
  const cases: [string, string, boolean, RegExp][] = [
    ["data", '{"a": 1,}', false, /^data is not valid JSON: .*(JSON|property|token)/],
    ["data", "", false, /^data: must be a JSON object, got nothing$/],
    ["data", "[1]", false, /^data: must be a JSON object, got an array$/],
    ["data", "7", false, /^data: must be a JSON object, got number$/],
    ["data", "null", false, /^data: must be a JSON object, got null$/],
    ["metadata", "{", true, /^metadata is not valid JSON: /],
  ];
  for (const [field, text, blankOk, want] of cases) {
    const r = checkObject(field, text, blankOk);
    assert.equal(r.ok, false, text);
    if (!r.ok) assert.match(r.error, want, text);
  }
});

test("checkObject takes blank or null metadata as none", () => {
  for (const text of ["", "  ", "null"]) {
    const r = checkObject("metadata", text, true);
    assert.ok(r.ok);
    assert.equal(r.bytes.length, 0);
  }
});

test("list splits on commas and drops blanks", () => {
  assert.deepEqual(list(" course:c1, student:s7 ,,"), ["course:c1", "student:s7"]);
  assert.deepEqual(list(""), []);
});
