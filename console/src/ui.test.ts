import { test } from "node:test";
import assert from "node:assert/strict";
import { IndexKind, IndexState } from "./gen/skald/v1/indexes_pb";
import { Role } from "./gen/skald/v1/credentials_pb";
import { enumName } from "./ui";

test("enumName names known values and numbers unknown ones", () => {
  const cases: [Record<number, string>, number, string, string][] = [
    [IndexState, IndexState.BUILDING, "state", "building"],
    [IndexState, IndexState.HEALTHY, "state", "healthy"],
    [IndexState, 7, "state", "state 7"], // a newer server's state
    [IndexKind, IndexKind.STREAM, "kind", "stream"],
    [IndexKind, 9, "kind", "kind 9"],
    [Role, Role.ADMIN, "role", "admin"],
    [Role, Role.UNSPECIFIED, "role", "unspecified"],
  ];
  for (const [e, v, what, want] of cases) assert.equal(enumName(e, v, what), want, `${what} ${v}`);
});
