// Append: one message to a stream, with an optional expected version;
// the reply's positions, or the API's error exactly as it came (a
// version conflict names the actual version).

import { describeError, session } from "../api";
import { h, replace } from "../ui";

export function appendPage(root: HTMLElement, args: string[]): () => void {
  const stream = h("input", { id: "append-stream", required: true, placeholder: "account-123", size: 30, value: args[0] ?? "" });
  const type = h("input", { id: "append-type", required: true, placeholder: "Deposited", size: 20 });
  const expected = h("input", { id: "append-expected", type: "number", min: -1, placeholder: "any", size: 8 });
  const data = h("textarea", { id: "append-data", rows: 8, cols: 60, spellcheck: false }, '{\n  "amount": 10\n}');
  const metadata = h("textarea", { id: "append-metadata", rows: 3, cols: 60, spellcheck: false, placeholder: "null" });
  const result = h("div", { id: "append-result" });

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const enc = new TextEncoder();
    const req = {
      stream: stream.value.trim(),
      expectedVersion: expected.value.trim() === "" ? undefined : BigInt(expected.value.trim()),
      messages: [{ type: type.value.trim(), data: enc.encode(data.value), metadata: enc.encode(metadata.value.trim()) }],
    };
    replace(result, h("p", { class: "muted" }, "Appending…"));
    try {
      const r = await session.call((c) => c.events.append(req, { timeoutMs: 15000 }), { data: true, write: true });
      replace(
        result,
        h(
          "p",
          { id: "append-ok", class: "good" },
          `Appended at position ${r.firstPosition} (global position ${r.firstGlobalPosition}, raft index ${r.index}). `,
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
      h("label", null, "Expected version ", expected, h("span", { class: "muted" }, " blank: any; -1: the stream must be empty; after a write it is set to the new version")),
      h("label", null, "Data (a JSON object)", data),
      h("label", null, "Metadata (a JSON object, or blank)", metadata),
      h("button", { type: "submit", id: "append-button" }, "Append"),
    ),
    result,
  );
  return () => {};
}
