// Namespaces: the list with counts and last activity; the admin creates
// (the new token is shown once) and deletes (after confirming). A
// namespace token sees its own namespace only.

import { timestampDate } from "@bufbuild/protobuf/wkt";
import { CALL_TIMEOUT, describeError, namespaceOf, session } from "../api";
import type { NamespaceInfo } from "../gen/skald/v1/namespaces_pb";
import { ago, confirmDialog, fmtTime, h, promptDialog, replace } from "../ui";

export function namespacesPage(root: HTMLElement): () => void {
  const list = h("div", { id: "ns-list" }, "Loading…");
  const msg = h("div", { id: "ns-message", class: "message", hidden: true });
  let stopped = false;

  const say = (...children: (Node | string)[]) => {
    replace(msg, ...children);
    msg.hidden = false;
  };

  const load = async () => {
    try {
      let rows: NamespaceInfo[];
      if (session.admin) rows = (await session.call((c) => c.namespaces.list({}, { timeoutMs: CALL_TIMEOUT }))).namespaces;
      else rows = [await session.call((c) => c.namespaces.get({ name: session.namespace }, { timeoutMs: CALL_TIMEOUT }))];
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
                  n.name !== session.acting ? h("button", { class: "work", "data-ns": n.name, onclick: () => workIn(n.name) }, "Work in") : null,
                  session.admin && n.name !== "default" ? h("button", { class: "delete danger", "data-ns": n.name, onclick: () => del(n.name) }, "Delete") : null,
                ),
              ),
            ),
          ),
        ),
      );
    } catch (e) {
      if (!stopped) replace(list, h("pre", { class: "error" }, describeError(e)));
    }
  };

  // workIn makes the data pages act on a namespace: the admin's own, one
  // created in this tab, or another whose token the admin pastes (checked
  // with Namespaces.Get before it is kept).
  const workIn = async (name: string) => {
    if (name !== session.namespace && !session.nsTokens[name]) {
      const token = await promptDialog(`The token of ${name} (the server keeps only its hash, so only you can supply it):`, "ns_…", "Work in " + name);
      if (!token) return;
      if (namespaceOf(token) !== name) {
        say(h("pre", { class: "error" }, `That is not a token of ${name}.`));
        return;
      }
      try {
        await session.call((c) => c.namespaces.get({ name }, { timeoutMs: CALL_TIMEOUT }), { token });
      } catch (e) {
        say(h("pre", { class: "error" }, describeError(e)));
        return;
      }
      session.rememberNamespace(name, token);
    }
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
      session.rememberNamespace(r.name, r.token);
      const use = h(
        "button",
        {
          id: "ns-use",
          onclick: () => {
            session.acting = r.name;
            location.hash = "#/streams";
          },
        },
        `Work in ${r.name}`,
      );
      say(
        h("p", null, "Created ", h("strong", null, r.name), ". Its token is shown only now; the server keeps only a hash:"),
        h("pre", { id: "ns-token", class: "token" }, r.token),
        h("p", { class: "muted" }, "This tab keeps it for this session, so you can read and write there: "),
        use,
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
  );
  void load();
  const timer = window.setInterval(load, 5000);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}
