// A Query (DCB) as a form: one row per item, each with its types and
// tags, written as comma-separated lists. The Query page, an append's
// condition and a group's source use it. A message matches an item when
// its type is any of the item's types (any type when none is given) and it
// carries every one of the item's tags; it matches the query when it
// matches any item.

import type { QueryItem } from "./gen/skald/v1/types_pb";
import { h } from "./ui";

/** list splits a comma-separated field into its trimmed, non-empty parts. */
export function list(text: string): string[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

export interface QueryEditor {
  el: HTMLElement;
  /** items are the rows that name a type or a tag; empty rows are left out. */
  items(): { types: string[]; tags: string[] }[];
}

/** queryEditor builds the form; id prefixes its inputs' ids (id-types-0, id-tags-0, …). */
export function queryEditor(id: string, initial: QueryItem[] = []): QueryEditor {
  const rows = h("div", { class: "query-items", id: `${id}-items` });
  let n = 0;
  const addRow = (it?: QueryItem) => {
    const i = n++;
    const types = h("input", { id: `${id}-types-${i}`, class: "q-types", placeholder: "Enrolled, Dropped", size: 26, value: it?.types.join(", ") ?? "" });
    const tags = h("input", { id: `${id}-tags-${i}`, class: "q-tags", placeholder: "course:c1, student:s7", size: 30, value: it?.tags.join(", ") ?? "" });
    const row: HTMLElement = h(
      "div",
      { class: "row query-item" },
      h("span", { class: "muted" }, i === 0 ? "match" : "or"),
      h("label", null, "types (any of)", types),
      h("label", null, "tags (all of)", tags),
      i > 0 ? h("button", { type: "button", class: "remove-item", onclick: () => row.remove() }, "×") : null,
    );
    rows.appendChild(row);
  };
  for (const it of initial) addRow(it);
  if (n === 0) addRow();
  const el = h("div", { class: "query-editor" }, rows, h("button", { type: "button", id: `${id}-add`, onclick: () => addRow() }, "Or another item"));
  return {
    el,
    items: () =>
      [...rows.querySelectorAll(".query-item")]
        .map((r) => ({ types: list((r.querySelector(".q-types") as HTMLInputElement).value), tags: list((r.querySelector(".q-tags") as HTMLInputElement).value) }))
        .filter((it) => it.types.length || it.tags.length),
  };
}

/** describeQuery writes a query the way the editor reads it. */
export function describeQuery(items: QueryItem[]): string {
  return items
    .map((it) => [it.types.length ? `type ${it.types.join(" | ")}` : "", it.tags.length ? `tags ${it.tags.join(" & ")}` : ""].filter((s) => s).join(", "))
    .join(" or ");
}
