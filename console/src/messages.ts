// How a stored message is shown: positions, time, type, id, its tags,
// and the data and metadata JSON pretty-printed. Every view (stream,
// category, query, live tail) lists messages oldest first, as the store
// orders them.

import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Message } from "./gen/skald/v1/types_pb";
import { fmtTime, h, prettyJSON } from "./ui";

export function messageView(m: Message, showStream: boolean): HTMLElement {
  return h(
    "article",
    { class: "msg", "data-gp": String(m.globalPosition), "data-type": m.type },
    h(
      "div",
      { class: "msg-head" },
      h("span", { class: "pos", title: "stream position" }, `#${m.position}`),
      h("span", { class: "gp", title: "global position" }, `gp ${m.globalPosition}`),
      showStream ? h("a", { class: "stream", href: `#/streams/stream/${encodeURIComponent(m.stream)}` }, m.stream) : null,
      h("strong", { class: "type" }, m.type),
      h("time", null, fmtTime(m.time && timestampDate(m.time))),
      h("code", { class: "muted small" }, m.id),
    ),
    m.tags.length ? h("div", { class: "tags" }, m.tags.map((t) => h("span", { class: "tag" }, t))) : null,
    h("div", { class: "msg-body" }, h("div", null, h("div", { class: "label" }, "data"), h("pre", { class: "json data" }, prettyJSON(m.data))), m.metadata.length ? h("div", null, h("div", { class: "label" }, "metadata"), h("pre", { class: "json metadata" }, prettyJSON(m.metadata))) : null),
  );
}
