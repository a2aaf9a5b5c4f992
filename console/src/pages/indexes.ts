// Indexes of the acting namespace (issue 29): the list with each index's
// source, fields and this node's progress (state, progress and ETA while
// building; lag in events and time; entries; skipped events), a form to
// create one, delete (after confirming), and an index's page with its
// definition and a query form (equality on the first fields, then a
// range or a prefix on the next, ascending or descending, a page at a
// time by cursor) that shows the hits with their messages. States,
// kinds, sources and types this build does not know (a newer server's)
// are shown by their number; the admin namespace holds no indexes.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { CALL_TIMEOUT, describeError, session } from "../api";
import { fmtDuration, toMs } from "../duration";
import {
  IndexFieldSource,
  IndexFieldType,
  IndexKind,
  IndexState,
  type IndexDefinition,
  type IndexField,
  type IndexesQueryRequestSchema,
  type IndexInfo,
  type IndexStatus,
} from "../gen/skald/v1/indexes_pb";
import { messageView } from "../messages";
import { describeQuery, list, queryEditor } from "../query";
import { confirmDialog, enumName, fmtTime, h, replace } from "../ui";

const REFRESH_MS = 2000;
const QUERY_PAGE = 50;

export function indexesPage(root: HTMLElement, args: string[]): () => void {
  if (session.acting === "default") {
    replace(
      root,
      h("h2", null, "Indexes"),
      h("p", { class: "muted", id: "indexes-admin-ns" }, "The admin namespace (default) holds no indexes: work in another namespace (Namespaces, Work in)."),
    );
    return () => {};
  }
  return args[0] ? indexPage(root, args[0]) : listPage(root);
}

/** sourceText says which events an index takes. */
export function sourceText(d: IndexDefinition): string {
  const parts: string[] = [];
  if (d.category) parts.push(`category ${d.category}`);
  if (d.types.length) parts.push(`types ${d.types.join(" | ")}`);
  if (d.query?.items.length) parts.push(`query: ${describeQuery(d.query.items)}`);
  return parts.join("; ") || "—";
}

/** fieldText writes one field: where its value comes from, and its type. */
export function fieldText(f: IndexField): string {
  const src = enumName(IndexFieldSource, f.source, "source");
  const at = f.source === IndexFieldSource.DATA || f.source === IndexFieldSource.METADATA ? `${src} ${f.pointer}` : src;
  return `${at} (${enumName(IndexFieldType, f.type, "type")})`;
}

/** stateText is the index's state on this node, with the reason when it failed. */
function stateText(st: IndexStatus): string {
  const name = enumName(IndexState, st.state, "state");
  return st.failure ? `${name}: ${st.failure}` : name;
}

/** lagText is how far an index is behind: events, and the age of the oldest it lacks. */
function lagText(st: IndexStatus): string {
  const ms = toMs(st.lag);
  return `${st.lagEvents} event${st.lagEvents === 1n ? "" : "s"}${ms ? `, ${fmtDuration(ms)}` : ""}`;
}

function progressText(st: IndexStatus): string {
  if (st.state === IndexState.HEALTHY) return "100%";
  const eta = toMs(st.eta);
  return `${Math.floor(st.progress * 1000) / 10}%${eta ? `, ETA ${fmtDuration(eta)}` : ""}`;
}

function listPage(root: HTMLElement): () => void {
  const listEl = h("div", { id: "indexes-list" }, "Loading…");
  const msg = h("div", { id: "indexes-message", class: "message" });
  let stopped = false;

  const load = async () => {
    try {
      const r = await session.call((c) => c.indexes.list({}, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped) return;
      replace(
        listEl,
        r.indexes.length === 0
          ? h("p", { class: "muted", id: "indexes-none" }, "No indexes in this namespace.")
          : h(
              "table",
              { id: "indexes-table", class: "cards" },
              h("thead", null, h("tr", null, ["Index", "Source", "Fields", "Kind", "State", "Progress", "Lag", "Entries", "Skipped", ""].map((t) => h("th", { class: ["Entries", "Skipped"].includes(t) ? "num" : null }, t)))),
              h("tbody", null, r.indexes.map(row)),
            ),
      );
    } catch (e) {
      if (!stopped) replace(listEl, h("pre", { class: "error", id: "indexes-list-error" }, describeError(e)));
    }
  };

  const row = (ix: IndexInfo) => {
    const d = ix.definition;
    const st = ix.status;
    if (!d) return null;
    return h(
      "tr",
      { "data-index": d.name },
      h("td", null, h("a", { href: `#/indexes/${encodeURIComponent(d.name)}` }, h("strong", null, d.name)), d.version ? h("span", { class: "muted small" }, ` v${d.version}`) : null),
      h("td", { "data-label": "Source" }, sourceText(d)),
      h("td", { "data-label": "Fields" }, d.fields.map((f) => h("div", null, fieldText(f)))),
      h("td", { class: "kind", "data-label": "Kind" }, enumName(IndexKind, d.kind, "kind")),
      h("td", { class: `state state-${st?.state ?? 0}`, "data-label": "State" }, st ? stateText(st) : "—"),
      h("td", { class: "progress", "data-label": "Progress" }, st ? progressText(st) : "—"),
      h("td", { class: "lag", "data-label": "Lag" }, st ? lagText(st) : "—"),
      h("td", { class: "num entries", "data-label": "Entries" }, st?.entries ?? 0n),
      h("td", { class: "num skipped", "data-label": "Skipped" }, st?.skipped ?? 0n),
      h("td", { class: "actions" }, h("button", { class: "delete danger", "data-index": d.name, onclick: () => del(d.name) }, "Delete")),
    );
  };

  const del = async (name: string) => {
    if (!(await confirmDialog(`Delete index ${name} of ${session.acting}? Every node drops its entries; the events stay.`, "Delete index"))) return;
    try {
      await session.call((c) => c.indexes.delete({ name }, { timeoutMs: 15000 }), { data: true, write: true });
      replace(msg, h("p", { id: "indexes-done", class: "good" }, `Deleted index ${name}.`));
    } catch (e) {
      replace(msg, h("pre", { class: "error", id: "indexes-error" }, describeError(e)));
    }
    void load();
  };

  const formMsg = h("div", { id: "index-create-message", class: "message" });
  const form = createForm(formMsg, load);
  replace(root, h("h2", null, "Indexes of ", h("code", null, session.acting)), msg, listEl, h("h3", null, "New index"), form, formMsg);
  void load();
  const timer = window.setInterval(load, REFRESH_MS);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}

/** createForm is the form that declares an index. */
function createForm(msg: HTMLElement, reload: () => Promise<void>): HTMLElement {
  const name = h("input", { id: "index-name", required: true, placeholder: "orders-by-customer", size: 20 });
  const category = h("input", { id: "index-category", placeholder: "order", size: 14 });
  const types = h("input", { id: "index-types", placeholder: "Placed, Shipped", size: 22 });
  const editor = queryEditor("index-q");
  const kind = h(
    "select",
    { id: "index-kind" },
    [IndexKind.EVENT, IndexKind.STREAM].map((k) => h("option", { value: String(k) }, enumName(IndexKind, k, "kind"))),
  );
  const fields = h("div", { id: "index-fields", class: "stack" });
  let n = 0;
  const addField = () => {
    const i = n++;
    const source = h(
      "select",
      { id: `index-field-source-${i}`, class: "f-source" },
      [IndexFieldSource.DATA, IndexFieldSource.METADATA, IndexFieldSource.TYPE, IndexFieldSource.STREAM, IndexFieldSource.TIME].map((s) => h("option", { value: String(s) }, enumName(IndexFieldSource, s, "source"))),
    );
    const pointer = h("input", { id: `index-field-pointer-${i}`, class: "f-pointer", placeholder: "/customer/id", size: 18 });
    const type = h(
      "select",
      { id: `index-field-type-${i}`, class: "f-type" },
      [IndexFieldType.STRING, IndexFieldType.INT, IndexFieldType.FLOAT, IndexFieldType.TIME, IndexFieldType.BOOL].map((t) => h("option", { value: String(t) }, enumName(IndexFieldType, t, "type"))),
    );
    source.addEventListener("change", () => {
      const s = Number(source.value);
      pointer.disabled = s !== IndexFieldSource.DATA && s !== IndexFieldSource.METADATA;
      if (pointer.disabled) pointer.value = "";
      if (s === IndexFieldSource.TYPE || s === IndexFieldSource.STREAM) type.value = String(IndexFieldType.STRING);
      if (s === IndexFieldSource.TIME) type.value = String(IndexFieldType.TIME);
    });
    const row: HTMLElement = h(
      "div",
      { class: "row index-field" },
      h("span", { class: "muted" }, i === 0 ? "by" : "then"),
      h("label", null, "from", source),
      h("label", null, "JSON pointer", pointer),
      h("label", null, "type", type),
      i > 0 ? h("button", { type: "button", class: "remove-item", onclick: () => row.remove() }, "×") : null,
    );
    fields.appendChild(row);
  };
  addField();

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const items = editor.items();
    const def = {
      name: name.value.trim(),
      category: category.value.trim(),
      types: list(types.value),
      query: items.length ? { items } : undefined,
      kind: Number(kind.value) as IndexKind,
      fields: [...fields.querySelectorAll(".index-field")].map((r) => ({
        source: Number((r.querySelector(".f-source") as HTMLSelectElement).value) as IndexFieldSource,
        pointer: (r.querySelector(".f-pointer") as HTMLInputElement).value.trim(),
        type: Number((r.querySelector(".f-type") as HTMLSelectElement).value) as IndexFieldType,
      })),
    };
    try {
      const r = await session.call((c) => c.indexes.create({ definition: def }, { timeoutMs: 15000 }), { data: true, write: true });
      replace(msg, h("p", { id: "index-created", class: "good" }, `Created index ${r.definition?.name ?? def.name}: every node builds it from the namespace's events.`));
      name.value = "";
    } catch (e) {
      replace(msg, h("pre", { class: "error", id: "index-create-error" }, describeError(e)));
    }
    void reload();
  };

  return h(
    "form",
    { id: "index-create", class: "card stack", onsubmit: submit },
    h("div", { class: "row" }, h("label", null, "Name", name), h("label", null, "Category", category), h("label", null, "Types (any of)", types), h("label", null, "Kind", kind)),
    h("div", { class: "muted small" }, "Source: an event is in the index when it matches every one of category, types and query given (at least one)."),
    editor.el,
    h("div", { class: "label" }, "Fields (the order of the entries)"),
    fields,
    h("div", { class: "row" }, h("button", { type: "button", id: "index-field-add", onclick: addField }, "Another field"), h("button", { type: "submit", id: "index-create-button" }, "Create index")),
  );
}

/** indexPage is one index: its definition and status, and the query form. */
function indexPage(root: HTMLElement, name: string): () => void {
  const info = h("div", { id: "index-info" }, "Loading…");
  const form = h("form", { id: "index-query", class: "card stack" });
  const status = h("div", { id: "index-query-status", class: "muted" });
  const hits = h("div", { id: "index-hits" });
  const more = h("button", { id: "index-more", type: "button", hidden: true }, "Next page");
  let stopped = false;
  let def: IndexDefinition | undefined;
  let req: MessageInitShape<typeof IndexesQueryRequestSchema> = {};
  let shown = 0;

  const loadInfo = async () => {
    try {
      const r = await session.call((c) => c.indexes.info({ name }, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped) return;
      const d = r.index?.definition;
      const st = r.index?.status;
      replace(
        info,
        h(
          "dl",
          { class: "settings card" },
          h("dt", null, "Source"),
          h("dd", null, d ? sourceText(d) : "—"),
          h("dt", null, "Fields"),
          h("dd", null, d ? d.fields.map((f, i) => h("div", null, `${i + 1}. ${fieldText(f)}`)) : "—"),
          h("dt", null, "Kind"),
          h("dd", null, d ? enumName(IndexKind, d.kind, "kind") : "—"),
          h("dt", null, "Created"),
          h("dd", null, fmtTime(d?.created && timestampDate(d.created))),
          h("dt", null, "State"),
          h("dd", { id: "index-state" }, st ? `${stateText(st)}: ${progressText(st)}; lag ${lagText(st)}` : "—"),
          h("dt", null, "Entries"),
          h("dd", { id: "index-entries" }, st ? `${st.entries} (${st.skipped} skipped)` : "—"),
        ),
      );
      if (d && !def) {
        def = d;
        buildForm(d);
      }
    } catch (e) {
      if (!stopped) replace(info, h("pre", { class: "error", id: "index-info-error" }, describeError(e)));
    }
  };

  const run = async () => {
    try {
      const r = await session.call((c) => c.indexes.query(req, { timeoutMs: 15000 }), { data: true });
      if (stopped) return;
      for (const hit of r.hits) {
        const values = h("div", { class: "tags hit-values" }, hit.values.map((v) => h("span", { class: "tag" }, v)));
        const el = hit.message ? messageView(hit.message, true) : h("article", { class: "msg", "data-gp": String(hit.globalPosition) }, h("div", { class: "msg-head" }, `gp ${hit.globalPosition}`));
        el.classList.add("hit");
        el.insertBefore(values, el.children[1] ?? null);
        hits.appendChild(el);
      }
      shown += r.hits.length;
      req = { ...req, cursor: r.nextCursor };
      more.hidden = r.nextCursor.length === 0;
      const lag = r.status && r.status.lagEvents > 0n ? `; the index is ${lagText(r.status)} behind` : "";
      replace(status, shown ? h("span", { id: "index-query-count" }, `${shown} hit${shown === 1 ? "" : "s"}${r.nextCursor.length ? " so far" : ""}${lag}`) : h("span", { id: "index-query-none" }, `No entry matches${lag}.`));
    } catch (e) {
      if (!stopped) replace(status, h("pre", { class: "error", id: "index-query-error" }, describeError(e)));
    }
  };
  more.addEventListener("click", () => void run());

  const buildForm = (d: IndexDefinition) => {
    const eq = d.fields.map((f, i) => h("input", { id: `index-eq-${i}`, class: "eq", placeholder: "any", size: 14, title: fieldText(f) }));
    const from = h("input", { id: "index-from", placeholder: "from", size: 14 });
    const fromEx = h("input", { id: "index-from-exclusive", type: "checkbox" });
    const to = h("input", { id: "index-to", placeholder: "to", size: 14 });
    const toEx = h("input", { id: "index-to-exclusive", type: "checkbox" });
    const prefix = h("input", { id: "index-prefix", placeholder: "starts with", size: 14 });
    const desc = h("input", { id: "index-descending", type: "checkbox" });
    const limit = h("input", { id: "index-limit", type: "number", min: 1, max: 1000, value: String(QUERY_PAGE), size: 6 });
    form.onsubmit = (ev: Event) => {
      ev.preventDefault();
      // equal: the values of the first fields, in order, up to the first
      // one left blank; a value after a blank one cannot be used.
      const values = eq.map((e) => e.value.trim());
      const k = values.indexOf("");
      const equal = k < 0 ? values : values.slice(0, k);
      if (k >= 0 && values.slice(k).some((v) => v !== "")) {
        replace(status, h("pre", { class: "error", id: "index-query-error" }, `equal: give the fields in order: field ${k + 1} is blank and a later one is not`));
        return;
      }
      req = {
        name,
        equal,
        from: from.value.trim() ? { value: from.value.trim(), exclusive: fromEx.checked } : undefined,
        to: to.value.trim() ? { value: to.value.trim(), exclusive: toEx.checked } : undefined,
        prefix: prefix.value.trim() ? prefix.value.trim() : undefined,
        descending: desc.checked,
        limit: Number(limit.value) || 0,
      };
      shown = 0;
      replace(hits);
      more.hidden = true;
      replace(status, "Reading…");
      void run();
    };
    replace(
      form,
      h("div", { class: "muted small" }, "Equal gives the first fields' values in order; then a range (from, to) or a prefix on the next field. Values are text: decimal ints, numbers, RFC 3339 times, true or false."),
      h("div", { class: "row" }, d.fields.map((f, i) => h("label", null, `= ${fieldText(f)}`, eq[i]))),
      h(
        "div",
        { class: "row" },
        h("label", null, "from", from),
        h("label", { class: "check" }, fromEx, "exclusive"),
        h("label", null, "to", to),
        h("label", { class: "check" }, toEx, "exclusive"),
        h("label", null, "or prefix", prefix),
      ),
      h("div", { class: "row" }, h("label", { class: "check" }, desc, "descending"), h("label", null, "limit", limit), h("button", { type: "submit", id: "index-run" }, "Query")),
    );
  };

  replace(root, h("h2", null, h("a", { href: "#/indexes" }, "Indexes"), " / ", h("code", { id: "index-title" }, name)), info, form, status, hits, more);
  void loadInfo();
  const timer = window.setInterval(loadInfo, REFRESH_MS);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}
