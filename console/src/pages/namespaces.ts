// Namespaces: the list with counts and last activity, a page at a time
// (Namespaces.List's cursor); the admin creates (the new token is shown
// once), deletes (after confirming) and works in any of them ("Work in":
// the data pages then name it in the Skald-Namespace header, no other
// token needed). A namespace token sees its own namespace only.

import { timestampDate } from "@bufbuild/protobuf/wkt";
import { CALL_TIMEOUT, describeError, session } from "../api";
import type { NamespaceInfo } from "../gen/skald/v1/namespaces_pb";
import { ago, confirmDialog, fmtTime, h, replace, tokenView } from "../ui";

/** PAGE is how many namespaces one page shows; #/namespaces/limit/N sets another (1..1000). */
const PAGE = 100;

export function namespacesPage(root: HTMLElement, args: string[]): () => void {
  const list = h("div", { id: "ns-list" }, "Loading…");
  const msg = h("div", { id: "ns-message", class: "message", hidden: true });
  const pager = h("div", { id: "ns-pager", class: "pager", hidden: true });
  const limit = args[0] === "limit" && Number(args[1]) >= 1 && Number(args[1]) <= 1000 ? Math.floor(Number(args[1])) : PAGE;
  // The cursors of the pages shown so far: cursors[i] starts page i.
  const cursors = [""];
  let page = 0;
  let next = "";
  let stopped = false;

  const say = (...children: (Node | string)[]) => {
    replace(msg, ...children);
    msg.hidden = false;
  };

  const load = async () => {
    try {
      let rows: NamespaceInfo[];
      if (session.admin) {
        const r = await session.call((c) => c.namespaces.list({ cursor: cursors[page], limit }, { timeoutMs: CALL_TIMEOUT }));
        rows = r.namespaces;
        next = r.nextCursor;
      } else rows = [await session.call((c) => c.namespaces.get({ name: session.namespace }, { timeoutMs: CALL_TIMEOUT }))];
      if (stopped) return;
      replace(
        list,
        h(
          "table",
          { id: "ns-table" },
          h("thead", null, h("tr", null, ["Name", "Description", "Created", "Messages", "Streams", "Last activity", ""].map((t) => h("th", null, t)))),
          h(
            "tbody",
            null,
            rows.map((n) =>
              h(
                "tr",
                { "data-ns": n.name },
                h("td", null, h("strong", null, n.name)),
                h("td", null, n.description),
                h("td", null, fmtTime(n.createdAt && timestampDate(n.createdAt))),
                h("td", { class: "num" }, n.messageCount),
                h("td", { class: "num" }, n.streamCount),
                h("td", { title: fmtTime(n.lastActivity && timestampDate(n.lastActivity)) }, ago(n.lastActivity && timestampDate(n.lastActivity))),
                h(
                  "td",
                  { class: "actions" },
                  session.admin && n.name !== session.acting ? h("button", { class: "work", "data-ns": n.name, onclick: () => workIn(n.name) }, "Work in") : null,
                  session.admin && n.name !== "default" ? h("button", { class: "delete danger", "data-ns": n.name, onclick: () => del(n.name) }, "Delete") : null,
                ),
              ),
            ),
          ),
        ),
      );
      showPager(rows.length);
    } catch (e) {
      if (!stopped) replace(list, h("pre", { class: "error" }, describeError(e)));
    }
  };

  const showPager = (shown: number) => {
    pager.hidden = page === 0 && !next;
    const first = page * limit + 1;
    replace(
      pager,
      h("button", { id: "ns-first", type: "button", disabled: page === 0, onclick: () => go(0) }, "First page"),
      h("button", { id: "ns-prev", type: "button", disabled: page === 0, onclick: () => go(page - 1) }, "Previous"),
      h("span", { id: "ns-page", class: "muted" }, shown ? `namespaces ${first}–${first + shown - 1}` : "no namespaces"),
      h("button", { id: "ns-next", type: "button", disabled: !next, onclick: () => go(page + 1) }, "Next page"),
    );
  };
  const go = (p: number) => {
    if (p === cursors.length) cursors.push(next);
    page = p;
    void load();
  };

  // workIn makes the data pages act on a namespace. The admin names it in
  // each call (the Skald-Namespace header); the server checks it exists.
  const workIn = (name: string) => {
    session.acting = name;
    location.hash = "#/streams";
  };

  const del = async (name: string) => {
    if (!(await confirmDialog(`Delete namespace ${name} and every message in it? This cannot be undone.`, "Delete namespace"))) return;
    try {
      const r = await session.call((c) => c.namespaces.delete({ name }, { timeoutMs: 15000 }), { write: true });
      session.forgetNamespace(name);
      say(`Deleted ${r.name}: ${r.messagesDeleted} messages.`);
    } catch (e) {
      say(h("pre", { class: "error" }, describeError(e)));
    }
    void load();
  };

  const name = h("input", { id: "ns-name", required: true, pattern: "[A-Za-z0-9._\\-]{1,128}", placeholder: "orders-prod" });
  const desc = h("input", { id: "ns-description", placeholder: "optional" });
  const create = async (ev: Event) => {
    ev.preventDefault();
    try {
      const r = await session.call((c) => c.namespaces.create({ name: name.value.trim(), description: desc.value }, { timeoutMs: 15000 }), { write: true });
      say(
        h("p", null, "Created ", h("strong", null, r.name), ". Its token (its owner credential, ", h("code", null, "initial"), ") is shown only now; the server keeps only a hash:"),
        tokenView("ns-token", r.token),
        h("button", { id: "ns-use", onclick: () => workIn(r.name) }, `Work in ${r.name}`),
      );
      name.value = "";
      desc.value = "";
    } catch (e) {
      say(h("pre", { class: "error" }, describeError(e)));
    }
    void load();
  };

  replace(
    root,
    h("h2", null, "Namespaces"),
    session.admin
      ? h("form", { id: "ns-create", class: "inline card", onsubmit: create }, h("label", null, "Name ", name), h("label", null, "Description ", desc), h("button", { type: "submit", id: "ns-create-button" }, "Create namespace"))
      : null,
    msg,
    list,
    pager,
  );
  void load();
  const timer = window.setInterval(load, 5000);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}
