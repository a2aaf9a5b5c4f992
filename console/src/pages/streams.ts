// Streams: the categories with their counts, a stream search by prefix
// (paged by cursor), and the messages of one stream or category, a page
// at a time, oldest first. A stream whose messages were all deleted says
// so, and a hard-deleted one (a tombstone) that it takes no more writes.

import { timestampDate } from "@bufbuild/protobuf/wkt";
import { CALL_TIMEOUT, describeError, session } from "../api";
import type { Message } from "../gen/skald/v1/types_pb";
import { messageView } from "../messages";
import { ago, fmtTime, h, replace } from "../ui";

const PAGE = 20;

export function streamsPage(root: HTMLElement, args: string[]): () => void {
  if (args[0] === "stream" && args[1]) return readPage(root, "stream", args[1], BigInt(args[2] ?? "0"));
  if (args[0] === "category" && args[1]) return readPage(root, "category", args[1], BigInt(args[2] ?? "1"));
  return listPage(root);
}

function listPage(root: HTMLElement): () => void {
  const cats = h("div", { id: "categories" }, "Loading…");
  const streams = h("div", { id: "streams" });
  const prefix = h("input", { id: "stream-search", type: "search", placeholder: "stream name prefix", size: 30 });
  const open = h("input", { id: "stream-open", placeholder: "stream or category name", size: 30 });
  let stopped = false;

  const loadCats = async () => {
    try {
      const r = await session.call((c) => c.events.listCategories({}, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped) return;
      replace(
        cats,
        r.categories.length === 0
          ? h("p", { class: "muted" }, "No messages yet.")
          : h(
              "table",
              { id: "categories-table" },
              h("thead", null, h("tr", null, ["Category", "Streams", "Messages"].map((t) => h("th", null, t)))),
              h(
                "tbody",
                null,
                r.categories.map((c) =>
                  h(
                    "tr",
                    null,
                    h("td", null, h("a", { href: `#/streams/category/${encodeURIComponent(c.category)}` }, c.category)),
                    h("td", { class: "num" }, c.streamCount),
                    h("td", { class: "num" }, c.messageCount),
                  ),
                ),
              ),
            ),
      );
    } catch (e) {
      if (!stopped) replace(cats, h("pre", { class: "error" }, describeError(e)));
    }
  };

  let cursor = "";
  let tbody: HTMLElement | null = null;
  const streamsError = h("pre", { class: "error", id: "streams-error", hidden: true });
  const loadStreams = async (more: boolean) => {
    if (!more) {
      cursor = "";
      tbody = h("tbody");
      replace(streams, h("table", { id: "streams-table" }, h("thead", null, h("tr", null, ["Stream", "Version", "Last activity"].map((t) => h("th", null, t)))), tbody), streamsError);
    }
    try {
      const r = await session.call((c) => c.events.listStreams({ prefix: prefix.value, cursor, limit: 50 }, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped || !tbody) return;
      for (const s of r.streams) {
        const at = s.lastActivity && timestampDate(s.lastActivity);
        tbody.appendChild(h("tr", null, h("td", null, h("a", { href: `#/streams/stream/${encodeURIComponent(s.stream)}` }, s.stream)), h("td", { class: "num" }, s.version), h("td", { title: fmtTime(at) }, ago(at))));
      }
      streams.querySelector(".more")?.remove();
      cursor = r.nextCursor;
      if (cursor) streams.appendChild(h("button", { class: "more", onclick: () => loadStreams(true) }, "More streams"));
      streamsError.hidden = true;
    } catch (e) {
      // One error in one place: a retry that fails again replaces it.
      if (stopped) return;
      streamsError.textContent = describeError(e);
      streamsError.hidden = false;
    }
  };

  let debounce = 0;
  prefix.addEventListener("input", () => {
    window.clearTimeout(debounce);
    debounce = window.setTimeout(() => loadStreams(false), 200);
  });
  const go = (ev: Event) => {
    ev.preventDefault();
    const name = open.value.trim();
    if (name) location.hash = `#/streams/${name.includes("-") ? "stream" : "category"}/${encodeURIComponent(name)}`;
  };
  replace(
    root,
    h("h2", null, "Streams in ", h("code", null, session.acting)),
    h("form", { class: "inline", onsubmit: go }, h("label", null, "Open ", open), h("button", { type: "submit", id: "stream-open-button" }, "Read"), h("span", { class: "muted" }, "a name with “-” is a stream, without one a category")),
    h("div", { class: "columns" }, h("section", null, h("h3", null, "Categories"), cats), h("section", null, h("h3", null, "Streams"), h("label", null, "Search ", prefix), streams)),
  );
  void loadCats();
  void loadStreams(false);
  return () => {
    stopped = true;
    window.clearTimeout(debounce);
  };
}

function readPage(root: HTMLElement, kind: "stream" | "category", name: string, from: bigint): () => void {
  const list = h("div", { id: "messages" }, "Loading…");
  const nav = h("div", { class: "pager" });
  const state = h("div", { id: "stream-state" });
  const appendLink = kind === "stream" ? h("a", { class: "button", href: `#/append/${encodeURIComponent(name)}`, id: "stream-append" }, "Append") : null;
  let stopped = false;
  const href = (pos: bigint) => `#/streams/${kind}/${encodeURIComponent(name)}/${pos}`;

  const load = async () => {
    try {
      const msgs: Message[] =
        kind === "stream"
          ? (await session.call((c) => c.events.readStream({ stream: name, position: from, limit: BigInt(PAGE) }, { timeoutMs: CALL_TIMEOUT }), { data: true })).messages
          : (await session.call((c) => c.events.readCategory({ category: name, globalPosition: from, limit: BigInt(PAGE) }, { timeoutMs: CALL_TIMEOUT }), { data: true })).messages;
      const ver = kind === "stream" ? await session.call((c) => c.events.streamVersion({ stream: name }, { timeoutMs: CALL_TIMEOUT }), { data: true }) : null;
      if (stopped) return;
      if (ver?.hardDeleted) {
        replace(state, h("p", { class: "notice", id: "stream-hard-deleted" }, `This stream was hard-deleted: its messages are gone and it accepts no more writes (a tombstone; it kept version ${ver.version}).`));
      } else if (ver && ver.version >= 0 && msgs.length === 0 && from === 0n) {
        replace(state, h("p", { class: "notice", id: "stream-emptied" }, `Every message of this stream was deleted; it kept version ${ver.version}, and the next append goes to position ${ver.version + 1n}.`));
      } else replace(state);
      if (appendLink) appendLink.hidden = ver?.hardDeleted === true;
      const first = kind === "stream" ? 0n : 1n;
      const next = msgs.length ? (kind === "stream" ? msgs[msgs.length - 1].position : msgs[msgs.length - 1].globalPosition) + 1n : from;
      const prev = kind === "stream" ? (from - BigInt(PAGE) > first ? from - BigInt(PAGE) : first) : null;
      replace(
        nav,
        h("a", { href: href(first), class: "button" }, "First"),
        prev !== null && from > first ? h("a", { href: href(prev), class: "button", id: "page-prev" }, "Previous") : null,
        msgs.length === PAGE ? h("a", { href: href(next), class: "button", id: "page-next" }, "Next") : null,
        h("span", { class: "muted" }, msgs.length ? `${kind === "stream" ? "positions" : "global positions"} ${from}… (${msgs.length} shown)` : `nothing at or after ${from}`),
      );
      replace(list, msgs.length ? msgs.map((m) => messageView(m, kind === "category")) : h("p", { class: "muted", id: "no-messages" }, "No messages here."));
    } catch (e) {
      if (!stopped) replace(list, h("pre", { class: "error" }, describeError(e)));
    }
  };
  replace(
    root,
    h("h2", null, h("a", { href: "#/streams" }, "Streams"), " / ", kind, " ", h("code", { id: "read-name" }, name)),
    h(
      "div",
      { class: "inline" },
      nav,
      h("button", { onclick: () => load() }, "Reload"),
      h("a", { class: "button", href: `#/tail/${kind}/${encodeURIComponent(name)}` }, "Live tail"),
      appendLink,
    ),
    state,
    list,
  );
  void load();
  return () => {
    stopped = true;
  };
}
