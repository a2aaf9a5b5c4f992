// A few DOM helpers: the console uses no framework; each page builds its
// elements with h() and replaces what changes.

type Child = Node | string | number | bigint | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | EventListener | null | undefined>;

/** h creates an element: attributes (on* keys become listeners), then children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") (el as HTMLInputElement).value = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Child[]) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** replace swaps the children of el for the given ones. */
export function replace(el: Element, ...children: Child[]) {
  el.replaceChildren();
  append(el, children);
}

/** svg creates an SVG element with the given attributes. */
export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: Element[]): SVGElement {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.appendChild(c);
  return el;
}

/** confirmDialog asks in a modal dialog; resolves true on confirm. */
export function confirmDialog(question: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const ok = h("button", { id: "confirm-ok", class: "danger", value: "ok" }, confirmLabel);
    const cancel = h("button", { id: "confirm-cancel", value: "cancel" }, "Cancel");
    const dlg = h("dialog", { id: "confirm" }, h("form", { method: "dialog" }, h("p", null, question), h("menu", null, cancel, ok)));
    dlg.addEventListener("close", () => {
      dlg.remove();
      resolve(dlg.returnValue === "ok");
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

/** tokenView shows a secret shown only once, with a button that copies it. */
export function tokenView(id: string, token: string): HTMLElement {
  const note = h("span", { class: "muted small", id: `${id}-copied` });
  const copy = h(
    "button",
    {
      type: "button",
      id: `${id}-copy`,
      onclick: () =>
        navigator.clipboard.writeText(token).then(
          () => replace(note, "Copied."),
          (e: unknown) => replace(note, `Not copied (${e instanceof Error ? e.message : String(e)}): select the token and copy it.`),
        ),
    },
    "Copy",
  );
  return h("div", { class: "token-box" }, h("pre", { id, class: "token" }, token), h("div", { class: "row" }, copy, note));
}

/** time formats a date in ISO form with milliseconds, in UTC. */
export function fmtTime(d: Date | undefined): string {
  return d ? d.toISOString().replace("T", " ").replace("Z", " UTC") : "—";
}

/** ago formats the time since d. */
export function ago(d: Date | undefined): string {
  if (!d || d.getTime() <= 0) return "never";
  const s = (Date.now() - d.getTime()) / 1000;
  if (s < 1) return "just now";
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 129600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** prettyJSON decodes UTF-8 JSON bytes and indents them; empty bytes are null. */
export function prettyJSON(b: Uint8Array): string {
  if (b.length === 0) return "null";
  const text = new TextDecoder().decode(b);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/**
 * enumName is the name of a protobuf enum value, lower-cased and without
 * its prefix ("healthy" for IndexState.HEALTHY); a value this build does
 * not know (a newer server's) is shown by its number ("state 7").
 */
export function enumName(e: Record<number, string>, value: number, what: string): string {
  const n = e[value];
  return n === undefined ? `${what} ${value}` : n.toLowerCase().replace(/_/g, " ");
}
