// Retention: the policies of one namespace (the admin picks which; a
// namespace token sees its own): what each scope (the namespace, a
// category, a stream) keeps, by age and by count. Set adds or replaces
// a scope's policy; Clear removes it (both limits zero). Expiry runs on
// the leader's schedule (--retention-interval). The admin namespace
// (default) holds the admin token and takes no policy.

import { CALL_TIMEOUT, describeError, listNamespaces, session } from "../api";
import { RetentionScope } from "../gen/skald/v1/namespaces_pb";
import { fmtDuration, fromMs, parseDuration, toMs } from "../duration";
import { h, replace } from "../ui";

const scopeName: Record<number, string> = { [RetentionScope.NAMESPACE]: "namespace", [RetentionScope.CATEGORY]: "category", [RetentionScope.STREAM]: "stream" };

export function retentionPage(root: HTMLElement, args: string[]): () => void {
  const pick = h("select", { id: "retention-ns" });
  const list = h("div", { id: "retention-list" }, "Loading…");
  const msg = h("div", { id: "retention-message" });
  let stopped = false;
  const ns = () => pick.value;

  const load = async () => {
    if (!ns()) return;
    try {
      const r = await session.call((c) => c.namespaces.listRetentionPolicies({ namespace: ns() }, { timeoutMs: CALL_TIMEOUT }));
      if (stopped) return;
      replace(
        list,
        r.policies.length === 0
          ? h("p", { class: "muted", id: "retention-none" }, `No retention policy: ${ns()} keeps every message.`)
          : h(
              "table",
              { id: "retention-table", class: "cards" },
              h("thead", null, h("tr", null, ["Scope", "Name", "Max age", "Max count", ""].map((t) => h("th", { class: t === "Max count" ? "num" : null }, t)))),
              h(
                "tbody",
                null,
                r.policies.map((p) => {
                  const age = toMs(p.maxAge);
                  return h(
                    "tr",
                    { "data-scope": scopeName[p.scope], "data-name": p.name },
                    h("td", { "data-label": "Scope" }, scopeName[p.scope] ?? String(p.scope)),
                    h("td", { "data-label": "Name" }, p.name ? h("code", null, p.name) : "—"),
                    h("td", { class: "max-age", "data-label": "Max age" }, age ? fmtDuration(age) : "—"),
                    h("td", { class: "num max-count", "data-label": "Max count" }, p.maxCount ? p.maxCount : "—"),
                    h("td", { class: "actions" }, h("button", { class: "clear danger", onclick: () => set(p.scope, p.name, 0, 0n) }, "Clear")),
                  );
                }),
              ),
            ),
      );
    } catch (e) {
      if (!stopped) replace(list, h("pre", { class: "error" }, describeError(e)));
    }
  };

  const set = async (scope: RetentionScope, name: string, ageMs: number, count: bigint) => {
    const what = `${scopeName[scope]}${name ? ` ${name}` : ""}`;
    try {
      const r = await session.call(
        (c) => c.namespaces.setRetentionPolicy({ namespace: ns(), policy: { scope, name, maxAge: ageMs ? fromMs(ageMs) : undefined, maxCount: count } }, { timeoutMs: 15000 }),
        { write: true },
      );
      const cleared = ageMs === 0 && count === 0n;
      replace(msg, h("p", { id: "retention-done", class: "good" }, cleared ? `Cleared the policy of the ${what}.` : `${r.replaced ? "Replaced" : "Set"} the policy of the ${what}.`));
    } catch (e) {
      replace(msg, h("pre", { class: "error", id: "retention-error" }, describeError(e)));
    }
    void load();
  };

  const scope = h(
    "select",
    { id: "retention-scope" },
    [RetentionScope.NAMESPACE, RetentionScope.CATEGORY, RetentionScope.STREAM].map((s) => h("option", { value: String(s) }, scopeName[s])),
  );
  const name = h("input", { id: "retention-name", placeholder: "account or account-1", size: 22, disabled: true });
  scope.addEventListener("change", () => {
    name.disabled = Number(scope.value) === RetentionScope.NAMESPACE;
    if (name.disabled) name.value = "";
  });
  const age = h("input", { id: "retention-age", placeholder: "7d, 12h, 90m", size: 10 });
  const count = h("input", { id: "retention-count", type: "number", min: 0, placeholder: "0: none", size: 10 });
  const submit = (ev: Event) => {
    ev.preventDefault();
    const a = parseDuration(age.value);
    if (!a.ok) {
      replace(msg, h("pre", { class: "error", id: "retention-error" }, `max age: ${a.error}`));
      return;
    }
    void set(Number(scope.value) as RetentionScope, name.value.trim(), a.ms, BigInt(count.value.trim() || "0"));
  };

  replace(
    root,
    h("h2", null, "Retention in ", pick),
    h(
      "form",
      { id: "retention-form", class: "card stack", onsubmit: submit },
      h("div", { class: "row" }, h("label", null, "Scope", scope), h("label", null, "Category or stream", name), h("label", null, "Max age", age), h("label", null, "Max count (per stream)", count)),
      h("p", { class: "muted small" }, "A message goes when any policy covering its stream removes it. Both limits zero (or blank) clears the scope's policy."),
      h("div", null, h("button", { type: "submit", id: "retention-set" }, "Set policy")),
    ),
    msg,
    list,
  );

  // The namespaces to choose from: the admin's every one but default; a
  // namespace token's own.
  const fill = async () => {
    let names: string[];
    if (session.admin) {
      try {
        names = (await listNamespaces()).map((n) => n.name).filter((n) => n !== "default");
      } catch (e) {
        replace(list, h("pre", { class: "error" }, describeError(e)));
        return;
      }
    } else names = [session.namespace];
    if (stopped) return;
    const want = args[0] ?? (session.acting !== "default" ? session.acting : names[0]);
    replace(pick, names.map((n) => h("option", { value: n, selected: n === want }, n)));
    if (names.length === 0) replace(list, h("p", { class: "muted" }, "No namespace takes a policy yet (default, the admin's, takes none): create one first."));
    else void load();
  };
  pick.addEventListener("change", () => {
    replace(msg);
    void load();
  });
  void fill();
  return () => {
    stopped = true;
  };
}
