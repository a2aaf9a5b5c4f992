// Credentials of the acting namespace (docs/access.md): the list (name,
// role, scope, expiry, last used, created), a form to create one (its
// token is shown only once, with a copy button) and revoke (after
// confirming). Working in default, the admin manages the cluster's admin
// credentials. The calls need an unscoped owner of the namespace or an
// admin; any other is refused with the server's message.

import { timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { CALL_TIMEOUT, describeError, session } from "../api";
import { Role } from "../gen/skald/v1/credentials_pb";
import { parseDuration } from "../duration";
import { list } from "../query";
import { ago, confirmDialog, enumName, fmtTime, h, replace, tokenView } from "../ui";

const REFRESH_MS = 5000;

export function credentialsPage(root: HTMLElement): () => void {
  const listEl = h("div", { id: "cred-list" }, "Loading…");
  const msg = h("div", { id: "cred-message", class: "message" });
  let stopped = false;

  const load = async () => {
    try {
      const r = await session.call((c) => c.credentials.list({}, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped) return;
      replace(
        listEl,
        h(
          "table",
          { id: "cred-table", class: "cards" },
          h("thead", null, h("tr", null, ["Name", "Role", "Scope", "Expires", "Last used", "Created", ""].map((t) => h("th", null, t)))),
          h(
            "tbody",
            null,
            r.credentials.map((cr) => {
              const expires = cr.expiresAt && timestampDate(cr.expiresAt);
              const used = cr.lastUsed && timestampDate(cr.lastUsed);
              return h(
                "tr",
                { "data-name": cr.name },
                h("td", null, h("strong", null, cr.name), cr.initial ? h("span", { class: "muted small" }, " (the namespace's first)") : null),
                h("td", { class: "role", "data-label": "Role" }, enumName(Role, cr.role, "role")),
                h("td", { class: "scope", "data-label": "Scope" }, cr.scope.length ? cr.scope.map((s) => h("span", { class: "tag" }, s)) : h("span", { class: "muted" }, "whole namespace")),
                h("td", { class: expires && expires.getTime() < Date.now() ? "bad" : null, "data-label": "Expires" }, expires ? fmtTime(expires) : "never"),
                h("td", { class: "last-used", "data-label": "Last used", title: "when the answering node last admitted it, to the minute (kept in memory: per node, empty after a restart)" }, used ? ago(used) : "not since this node started"),
                h("td", { "data-label": "Created" }, fmtTime(cr.createdAt && timestampDate(cr.createdAt))),
                h("td", { class: "actions" }, h("button", { class: "revoke danger", "data-name": cr.name, onclick: () => revoke(cr.name) }, "Revoke")),
              );
            }),
          ),
        ),
      );
    } catch (e) {
      if (!stopped) replace(listEl, h("pre", { class: "error", id: "cred-list-error" }, describeError(e)));
    }
  };

  const revoke = async (name: string) => {
    if (!(await confirmDialog(`Revoke credential ${name} of ${session.acting}? Every node refuses its token from then on.`, "Revoke"))) return;
    try {
      await session.call((c) => c.credentials.revoke({ name }, { timeoutMs: 15000 }), { data: true, write: true });
      replace(msg, h("p", { id: "cred-done", class: "good" }, `Revoked ${name}: every node refuses its token.`));
    } catch (e) {
      replace(msg, h("pre", { class: "error", id: "cred-error" }, describeError(e)));
    }
    void load();
  };

  const name = h("input", { id: "cred-name", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9._\\-]{0,63}", placeholder: "billing", size: 16 });
  const roles = [Role.READER, Role.WRITER, Role.OWNER, ...(session.acting === "default" ? [Role.ADMIN] : [])];
  const role = h(
    "select",
    { id: "cred-role" },
    roles.map((r) => h("option", { value: String(r) }, enumName(Role, r, "role"))),
  );
  const scope = h("input", { id: "cred-scope", placeholder: "invoice, order-eu-*", size: 24 });
  const expires = h("input", { id: "cred-expires", placeholder: "30d, 12h (blank: never)", size: 18 });
  const create = async (ev: Event) => {
    ev.preventDefault();
    const d = parseDuration(expires.value);
    if (!d.ok) {
      replace(msg, h("pre", { class: "error", id: "cred-error" }, `expires: ${d.error}`));
      return;
    }
    try {
      const r = await session.call(
        (c) =>
          c.credentials.create(
            { name: name.value.trim(), role: Number(role.value) as Role, scope: list(scope.value), expiresAt: d.ms ? timestampFromMs(Date.now() + d.ms) : undefined },
            { timeoutMs: 15000 },
          ),
        { data: true, write: true },
      );
      replace(
        msg,
        h(
          "div",
          { id: "cred-created", class: "notice" },
          h("p", null, "Created ", h("strong", null, r.credential?.name ?? ""), ` (${enumName(Role, r.credential?.role ?? 0, "role")}). `, h("strong", null, "Its token is shown only now:"), " the server keeps only a hash, so copy it to where it will be used."),
          tokenView("cred-token", r.token),
        ),
      );
      name.value = "";
      scope.value = "";
      expires.value = "";
    } catch (e) {
      replace(msg, h("pre", { class: "error", id: "cred-error" }, describeError(e)));
    }
    void load();
  };

  replace(
    root,
    h("h2", null, "Credentials of ", h("code", null, session.acting)),
    session.acting === "default" ? h("p", { class: "muted" }, "The admin namespace: its credentials are the cluster's admins (and any others it holds).") : null,
    h(
      "form",
      { id: "cred-form", class: "card stack", onsubmit: create },
      h("div", { class: "row" }, h("label", null, "Name", name), h("label", null, "Role", role), h("label", null, "Scope (categories, prefixes*)", scope), h("label", null, "Expires in", expires)),
      h("p", { class: "muted small" }, "reader: reads, queries, subscriptions; writer: and appends; owner: and the namespace's settings and credentials. A scope limits the credential to those categories and stream-name prefixes (blank: the whole namespace)."),
      h("div", null, h("button", { type: "submit", id: "cred-create" }, "Create credential")),
    ),
    msg,
    listEl,
  );
  void load();
  const timer = window.setInterval(load, REFRESH_MS);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}
