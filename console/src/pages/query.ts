// Query: the acting namespace's messages that match a query (any of the
// items; an item: any of its types and all of its tags) above a global
// position, in global order, a page at a time ("More" reads on from the
// last one shown).

import { CALL_TIMEOUT, describeError, session } from "../api";
import { messageView } from "../messages";
import { queryEditor } from "../query";
import { h, replace } from "../ui";

const PAGE = 50n;

export function queryPage(root: HTMLElement): () => void {
  const editor = queryEditor("query");
  const after = h("input", { id: "query-after", type: "number", min: 0, value: "0", size: 10 });
  const status = h("div", { id: "query-status", class: "muted" });
  const results = h("div", { id: "query-results" });
  const more = h("button", { id: "query-more", type: "button", hidden: true }, "More");
  let stopped = false;
  let next = 0n;
  let items: ReturnType<typeof editor.items> = [];
  let shown = 0;

  const load = async (from: bigint) => {
    try {
      const r = await session.call((c) => c.events.query({ query: { items }, after: from, limit: PAGE }, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped) return;
      for (const m of r.messages) results.appendChild(messageView(m, true));
      shown += r.messages.length;
      const last = r.messages[r.messages.length - 1];
      if (last) next = last.globalPosition;
      more.hidden = !(r.truncated || BigInt(r.messages.length) === PAGE);
      replace(status, shown ? `${shown} matching message${shown === 1 ? "" : "s"} after global position ${after.value || 0}` : h("span", { id: "query-none" }, "No message matches."));
    } catch (e) {
      if (!stopped) replace(status, h("pre", { class: "error", id: "query-error" }, describeError(e)));
    }
  };
  const run = (ev: Event) => {
    ev.preventDefault();
    items = editor.items();
    shown = 0;
    replace(results);
    more.hidden = true;
    replace(status, "Reading…");
    void load(BigInt(after.value.trim() || "0"));
  };
  more.addEventListener("click", () => void load(next));

  replace(
    root,
    h("h2", null, "Query in ", h("code", null, session.acting)),
    h("form", { id: "query-form", class: "card stack", onsubmit: run }, editor.el, h("label", null, "After global position ", after), h("button", { type: "submit", id: "query-run" }, "Query")),
    status,
    results,
    more,
  );
  return () => {
    stopped = true;
  };
}
