// Append: one message to a stream, with its tags, an optional message id
// (idempotent retries), an optional expected version and an optional
// DCB condition (fail if a message matching a query exists after a
// global position). Data and metadata are checked as JSON in the browser
// first (the parser's message, nothing sent); then the reply's positions,
// or the API's error as it came.

import { describeError, session } from "../api";
import { checkObject } from "../json";
import { list, queryEditor } from "../query";
import { h, replace } from "../ui";

export function appendPage(root: HTMLElement, args: string[]): () => void {
  const stream = h("input", { id: "append-stream", required: true, placeholder: "account-123", size: 30, value: args[0] ?? "" });
  const type = h("input", { id: "append-type", required: true, placeholder: "Deposited", size: 20 });
  const tags = h("input", { id: "append-tags", placeholder: "course:c1, student:s7", size: 40 });
  const id = h("input", { id: "append-id", placeholder: "generated", size: 38, pattern: "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}" });
  const expected = h("input", { id: "append-expected", type: "number", min: -1, placeholder: "any", size: 8 });
  const data = h("textarea", { id: "append-data", rows: 8, cols: 60, spellcheck: false }, '{\n  "amount": 10\n}');
  const metadata = h("textarea", { id: "append-metadata", rows: 3, cols: 60, spellcheck: false, placeholder: "null" });
  const useCond = h("input", { id: "append-condition", type: "checkbox" });
  const cond = queryEditor("append-cond");
  const after = h("input", { id: "append-after", type: "number", min: 0, value: "0", size: 10 });
  const condBox = h("fieldset", { id: "append-condition-box", class: "stack", hidden: true }, h("legend", null, "Fail if a message matching this query exists after a global position"), cond.el, h("label", null, "After global position ", after, h("span", { class: "muted" }, " 0: any matching message fails the append")));
  useCond.addEventListener("change", () => (condBox.hidden = !useCond.checked));
  const result = h("div", { id: "append-result" });

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const d = checkObject("data", data.value, false);
    const md = checkObject("metadata", metadata.value, true);
    const bad = [d, md].filter((r) => !r.ok).map((r) => (r.ok ? "" : r.error));
    if (bad.length || !d.ok || !md.ok) {
      replace(result, h("pre", { id: "append-invalid", class: "error" }, bad.join("\n")));
      return;
    }
    const req = {
      stream: stream.value.trim(),
      expectedVersion: expected.value.trim() === "" ? undefined : BigInt(expected.value.trim()),
      messages: [{ id: id.value.trim(), type: type.value.trim(), data: d.bytes, metadata: md.bytes, tags: list(tags.value) }],
      condition: useCond.checked ? { failIfEventsMatch: { items: cond.items() }, after: BigInt(after.value.trim() || "0") } : undefined,
    };
    replace(result, h("p", { class: "muted" }, "Appending…"));
    try {
      const r = await session.call((c) => c.events.append(req, { timeoutMs: 15000 }), { data: true, write: true });
      replace(
        result,
        h(
          "p",
          { id: "append-ok", class: "good" },
          r.duplicate
            ? `Already written (the same message id): nothing new, the original position ${r.firstPosition} (global position ${r.firstGlobalPosition}). `
            : `Appended at position ${r.firstPosition} (global position ${r.firstGlobalPosition}, raft index ${r.index}). `,
          h("a", { href: `#/streams/stream/${encodeURIComponent(req.stream)}` }, "Read the stream"),
        ),
      );
      expected.value = String(r.lastPosition);
    } catch (e) {
      replace(result, h("pre", { id: "append-error", class: "error" }, describeError(e)));
    }
  };

  replace(
    root,
    h("h2", null, "Append to ", h("code", null, session.acting)),
    h(
      "form",
      { id: "append-form", class: "card stack", onsubmit: submit },
      h("label", null, "Stream ", stream),
      h("label", null, "Type ", type),
      h("label", null, "Tags ", tags, h("span", { class: "muted" }, " comma-separated; for Query and conditions")),
      h("label", null, "Message id ", id, h("span", { class: "muted" }, " a UUID; blank: the server makes one. The same id again is a retry, not a second message")),
      h("label", null, "Expected version ", expected, h("span", { class: "muted" }, " blank: any; -1: the stream must be empty; after a write it is set to the new version")),
      h("label", null, "Data (a JSON object)", data),
      h("label", null, "Metadata (a JSON object, or blank)", metadata),
      h("label", null, useCond, " With a condition (DCB)"),
      condBox,
      h("button", { type: "submit", id: "append-button" }, "Append"),
    ),
    result,
  );
  return () => {};
}
