// Subscription groups (persistent subscriptions) of the acting namespace:
// the list with each group's source, lag, messages in flight and parked;
// a form to create one; and a group's page: its live state and consumers,
// its settings (editable: only the fields changed are sent, UpdateGroup
// keeps the rest), and its parked messages, which can be replayed or
// deleted one by one, as a selection, or all at once. The list and the
// state refresh every 2 s (the live state comes from the group's owner,
// the leader; it is zero while no consumer is attached).

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { CALL_TIMEOUT, describeError, session } from "../api";
import { ConsumerStrategy, type GroupInfo, type GroupSettings, type GroupSettingsSchema, type ParkedMessage } from "../gen/skald/v1/subscriptions_pb";
import { fromMs, toMs } from "../duration";
import { describeQuery, queryEditor } from "../query";
import { ago, confirmDialog, fmtTime, h, replace } from "../ui";

const REFRESH_MS = 2000;
const PARKED_PAGE = 100;

export function groupsPage(root: HTMLElement, args: string[]): () => void {
  return args[0] ? groupPage(root, args[0]) : listPage(root);
}

/** source says what a group reads. */
export function source(g: GroupInfo): string {
  switch (g.source.case) {
    case "stream":
      return `stream ${g.source.value}`;
    case "category":
      return `category ${g.source.value}`;
    case "query":
      return `query: ${describeQuery(g.source.value.items)}`;
    default:
      return "the whole namespace";
  }
}


function listPage(root: HTMLElement): () => void {
  const list = h("div", { id: "groups-list" }, "Loading…");
  const msg = h("div", { id: "groups-message", class: "message", hidden: true });
  let stopped = false;

  const load = async () => {
    try {
      const r = await session.call((c) => c.subscriptions.listGroups({}, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped) return;
      replace(
        list,
        r.groups.length === 0
          ? h("p", { class: "muted", id: "groups-none" }, "No subscription groups in this namespace.")
          : h(
              "table",
              { id: "groups-table", class: "cards" },
              h("thead", null, h("tr", null, ["Group", "Source", "Consumers", "Lag", "In flight", "Parked", "Checkpoint"].map((t) => h("th", { class: ["Group", "Source"].includes(t) ? null : "num" }, t)))),
              h(
                "tbody",
                null,
                r.groups.map((g) =>
                  h(
                    "tr",
                    { "data-group": g.name },
                    h("td", null, h("a", { href: `#/groups/${encodeURIComponent(g.name)}` }, h("strong", null, g.name))),
                    h("td", { "data-label": "Source" }, source(g)),
                    h("td", { class: "num consumers", "data-label": "Consumers" }, g.state?.consumers ?? 0),
                    h("td", { class: "num lag", "data-label": "Lag" }, g.state?.lag ?? 0n),
                    h("td", { class: "num in-flight", "data-label": "In flight" }, g.state?.inFlight ?? 0n),
                    h("td", { class: "num parked", "data-label": "Parked" }, g.parked),
                    h("td", { class: "num", "data-label": "Checkpoint" }, g.checkpoint),
                  ),
                ),
              ),
            ),
      );
    } catch (e) {
      if (!stopped) replace(list, h("pre", { class: "error" }, describeError(e)));
    }
  };

  // Create a group: a name, what it reads, where it starts.
  const name = h("input", { id: "group-name", required: true, placeholder: "billing", size: 18 });
  const kind = h("select", { id: "group-source" }, ["category", "stream", "all", "query"].map((k) => h("option", { value: k }, k === "all" ? "the whole namespace" : k)));
  const target = h("input", { id: "group-target", placeholder: "account", size: 20 });
  const query = queryEditor("group-query");
  const queryBox = h("div", { hidden: true }, query.el);
  const targetLabel = h("label", null, "Stream or category", target);
  kind.addEventListener("change", () => {
    targetLabel.hidden = kind.value === "all" || kind.value === "query";
    queryBox.hidden = kind.value !== "query";
  });
  const start = h("select", { id: "group-start" }, h("option", { value: "begin" }, "from the first message"), h("option", { value: "end" }, "only new messages"));
  const create = async (ev: Event) => {
    ev.preventDefault();
    const t = target.value.trim();
    const src =
      kind.value === "stream"
        ? { case: "stream" as const, value: t }
        : kind.value === "category"
          ? { case: "category" as const, value: t }
          : kind.value === "query"
            ? { case: "query" as const, value: { items: query.items() } }
            : { case: "all" as const, value: true };
    const st = start.value === "end" ? { case: "startAtEnd" as const, value: true } : { case: "startGlobalPosition" as const, value: 1n };
    try {
      const r = await session.call((c) => c.subscriptions.createGroup({ name: name.value.trim(), source: src, start: st }, { timeoutMs: 15000 }), { data: true, write: true });
      replace(msg, h("p", { id: "group-created" }, "Created ", h("a", { href: `#/groups/${encodeURIComponent(r.group?.name ?? "")}` }, r.group?.name ?? ""), "."));
      name.value = "";
    } catch (e) {
      replace(msg, h("pre", { class: "error" }, describeError(e)));
    }
    msg.hidden = false;
    void load();
  };

  replace(
    root,
    h("h2", null, "Subscription groups in ", h("code", null, session.acting)),
    h(
      "form",
      { id: "group-create", class: "card stack", onsubmit: create },
      h("div", { class: "row" }, h("label", null, "Name", name), h("label", null, "Reads", kind), targetLabel, h("label", null, "Starting", start)),
      queryBox,
      h("div", null, h("button", { type: "submit", id: "group-create-button" }, "Create group")),
    ),
    msg,
    list,
  );
  void load();
  const timer = window.setInterval(load, REFRESH_MS);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}

/** settingFields are GroupSettings' editable numbers: key, label, unit. */
const settingFields: { key: keyof GroupSettings; label: string; ms?: boolean; help: string }[] = [
  { key: "maxInFlightPerConsumer", label: "Max in flight per consumer", help: "1..10000" },
  { key: "maxInFlight", label: "Max in flight", help: "1..100000" },
  { key: "ackTimeout", label: "Ack timeout (ms)", ms: true, help: "100 ms..1 h" },
  { key: "maxRetries", label: "Max retries", help: "0..1000; then parked" },
  { key: "maxConsumers", label: "Max consumers", help: "1..1000" },
  { key: "checkpointAfter", label: "Checkpoint after (messages)", help: "1..100000" },
  { key: "checkpointInterval", label: "Checkpoint interval (ms)", ms: true, help: "10 ms..1 min" },
];

function groupPage(root: HTMLElement, name: string): () => void {
  const info = h("div", { id: "group-info" }, "Loading…");
  const settings = h("form", { id: "group-settings", class: "card stack" });
  const settingsMsg = h("div", { id: "group-settings-message" });
  const parked = h("div", { id: "group-parked" }, "Loading…");
  const parkedMsg = h("div", { id: "parked-message" });
  let stopped = false;
  let current: GroupInfo | undefined;
  let after = 0n;

  const drawInfo = (g: GroupInfo) => {
    const s = g.state;
    replace(
      info,
      h(
        "dl",
        { class: "settings card" },
        h("dt", null, "Source"),
        h("dd", { id: "group-source-text" }, source(g)),
        h("dt", null, "Starts at"),
        h("dd", null, `global position ${g.start}`),
        h("dt", null, "Created"),
        h("dd", null, fmtTime(g.createdAt && timestampDate(g.createdAt))),
        h("dt", null, "Checkpoint"),
        h("dd", null, `every message below global position ${g.checkpoint} is settled`),
        h("dt", null, "Consumers"),
        h("dd", { id: "group-consumers" }, s?.active ? `${s.consumers} attached` : "none attached"),
        h("dt", null, "Lag"),
        h("dd", { id: "group-lag" }, String(s?.lag ?? 0n)),
        h("dt", null, "In flight"),
        h("dd", { id: "group-in-flight" }, String(s?.inFlight ?? 0n)),
        h("dt", null, "Since the owner started"),
        h("dd", null, `${s?.acked ?? 0n} acked, ${s?.redeliveries ?? 0n} redelivered, ${s?.parkedSinceStart ?? 0n} parked`),
        h("dt", null, "Parked"),
        h("dd", { id: "group-parked-count" }, `${g.parked}${g.replaying ? ` (${g.replaying} replaying)` : ""}`),
      ),
    );
  };

  const drawSettings = (g: GroupInfo) => {
    const st = g.settings;
    const inputs = settingFields.map((f) => {
      const v = st?.[f.key];
      const cur = f.ms ? toMs(v as Duration | undefined) : Number(v ?? 0);
      return { f, cur, input: h("input", { id: `setting-${f.key}`, type: "number", min: 0, value: String(cur), size: 8, "data-current": String(cur) }) };
    });
    const strategy = h(
      "select",
      { id: "setting-strategy" },
      [
        [ConsumerStrategy.ROUND_ROBIN, "round robin"],
        [ConsumerStrategy.PINNED, "pinned (each stream to one consumer, in order)"],
      ].map(([v, label]) => h("option", { value: String(v), selected: (st?.strategy || ConsumerStrategy.ROUND_ROBIN) === v }, String(label))),
    );
    const save = async (ev: Event) => {
      ev.preventDefault();
      const changed: Record<string, unknown> = {};
      for (const { f, cur, input } of inputs) {
        const v = Number(input.value);
        if (input.value.trim() === "" || v === cur) continue;
        changed[f.key] = f.ms ? fromMs(v) : v;
      }
      const strat = Number(strategy.value) as ConsumerStrategy;
      if (strat !== (st?.strategy || ConsumerStrategy.ROUND_ROBIN)) changed.strategy = strat;
      if (Object.keys(changed).length === 0) {
        replace(settingsMsg, h("p", { class: "muted" }, "Nothing changed."));
        return;
      }
      try {
        const r = await session.call((c) => c.subscriptions.updateGroup({ name, settings: changed as MessageInitShape<typeof GroupSettingsSchema> }, { timeoutMs: 15000 }), { data: true, write: true });
        replace(settingsMsg, h("p", { id: "settings-saved", class: "good" }, `Saved (raft index ${r.index}).`));
        if (r.group) {
          current = r.group;
          drawSettings(r.group);
        }
      } catch (e) {
        replace(settingsMsg, h("pre", { class: "error", id: "settings-error" }, describeError(e)));
      }
    };
    settings.onsubmit = save;
    replace(
      settings,
      h("h3", null, "Settings"),
      h("dl", { class: "settings" }, inputs.map(({ f, input }) => [h("dt", null, h("label", { for: input.id }, f.label)), h("dd", null, input, h("span", { class: "muted small" }, " ", f.help))]), h("dt", null, "Strategy"), h("dd", null, strategy)),
      h("div", null, h("button", { type: "submit", id: "settings-save" }, "Save settings")),
      settingsMsg,
    );
  };

  const loadGroup = async () => {
    try {
      const r = await session.call((c) => c.subscriptions.getGroup({ name }, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped || !r.group) return;
      const firstTime = !current;
      current = r.group;
      drawInfo(r.group);
      if (firstTime) drawSettings(r.group); // not redrawn under the user's edits
    } catch (e) {
      if (!stopped) replace(info, h("pre", { class: "error" }, describeError(e)));
    }
  };

  const loadParked = async () => {
    try {
      const r = await session.call((c) => c.subscriptions.listParked({ group: name, after, limit: PARKED_PAGE }, { timeoutMs: CALL_TIMEOUT }), { data: true });
      if (stopped) return;
      drawParked(r.messages, r.total);
    } catch (e) {
      if (!stopped) replace(parked, h("pre", { class: "error" }, describeError(e)));
    }
  };

  const act = async (what: "replay" | "delete", positions: bigint[]) => {
    const n = positions.length ? `${positions.length} parked message${positions.length === 1 ? "" : "s"}` : "every parked message";
    if (what === "delete" && !(await confirmDialog(`Delete ${n} of ${name}? They are not delivered again.`, "Delete parked"))) return;
    try {
      if (what === "replay") {
        const r = await session.call((c) => c.subscriptions.replayParked({ group: name, globalPositions: positions }, { timeoutMs: 15000 }), { data: true, write: true });
        replace(parkedMsg, h("p", { id: "parked-done", class: "good" }, `Replayed ${r.replayed}; ${r.parked} still parked.`));
      } else {
        const r = await session.call((c) => c.subscriptions.deleteParked({ group: name, globalPositions: positions }, { timeoutMs: 15000 }), { data: true, write: true });
        replace(parkedMsg, h("p", { id: "parked-done", class: "good" }, `Deleted ${r.deleted}; ${r.parked} still parked.`));
      }
    } catch (e) {
      replace(parkedMsg, h("pre", { class: "error" }, describeError(e)));
    }
    void loadParked();
    void loadGroup();
  };

  const drawParked = (msgs: ParkedMessage[], total: bigint) => {
    const selected = () => [...parked.querySelectorAll<HTMLInputElement>("input.pick:checked")].map((i) => BigInt(i.value));
    replace(
      parked,
      msgs.length === 0
        ? h("p", { class: "muted", id: "parked-none" }, "No parked messages.")
        : [
            h(
              "div",
              { class: "inline" },
              h("span", { class: "muted" }, `${total} parked`),
              h("button", { id: "replay-selected", onclick: () => act("replay", selected()) }, "Replay selected"),
              h("button", { id: "delete-selected", class: "danger", onclick: () => act("delete", selected()) }, "Delete selected"),
              h("button", { id: "replay-all", onclick: () => act("replay", []) }, "Replay all"),
            ),
            h(
              "table",
              { id: "parked-table", class: "cards" },
              h("thead", null, h("tr", null, ["", "Global position", "Stream", "Position", "Reason", "Deliveries", "Parked", ""].map((t) => h("th", null, t)))),
              h(
                "tbody",
                null,
                msgs.map((m) =>
                  h(
                    "tr",
                    { "data-gp": String(m.globalPosition) },
                    h("td", null, h("input", { type: "checkbox", class: "pick", value: String(m.globalPosition) })),
                    h("td", { class: "num", "data-label": "Global position" }, m.globalPosition),
                    h("td", { "data-label": "Stream" }, h("a", { href: `#/streams/stream/${encodeURIComponent(m.stream)}/${m.position}` }, m.stream)),
                    h("td", { class: "num", "data-label": "Position" }, m.position),
                    h("td", { class: "reason", "data-label": "Reason" }, m.reason || "—"),
                    h("td", { class: "num", "data-label": "Deliveries" }, m.deliveries),
                    h("td", { "data-label": "Parked", title: fmtTime(m.parkedAt && timestampDate(m.parkedAt)) }, ago(m.parkedAt && timestampDate(m.parkedAt))),
                    h(
                      "td",
                      { class: "actions" },
                      h("button", { class: "replay", onclick: () => act("replay", [m.globalPosition]) }, "Replay"),
                      h("button", { class: "delete danger", onclick: () => act("delete", [m.globalPosition]) }, "Delete"),
                    ),
                  ),
                ),
              ),
            ),
            h(
              "div",
              { class: "pager" },
              after > 0n ? h("button", { onclick: () => ((after = 0n), void loadParked()) }, "First") : null,
              msgs.length === PARKED_PAGE ? h("button", { id: "parked-next", onclick: () => ((after = msgs[msgs.length - 1].globalPosition), void loadParked()) }, "Next") : null,
            ),
          ],
    );
  };

  const del = async () => {
    if (!(await confirmDialog(`Delete the group ${name}? Its progress and parked messages are gone; the messages themselves stay.`, "Delete group"))) return;
    try {
      await session.call((c) => c.subscriptions.deleteGroup({ name }, { timeoutMs: 15000 }), { data: true, write: true });
      location.hash = "#/groups";
    } catch (e) {
      replace(parkedMsg, h("pre", { class: "error" }, describeError(e)));
    }
  };

  replace(
    root,
    h("h2", null, h("a", { href: "#/groups" }, "Groups"), " / ", h("code", { id: "group-title" }, name)),
    h("div", { class: "inline" }, h("button", { onclick: () => (void loadGroup(), void loadParked()) }, "Reload"), h("button", { id: "group-delete", class: "danger", onclick: del }, "Delete group")),
    h("div", { class: "columns" }, info, settings),
    h("h3", null, "Parked messages"),
    parkedMsg,
    parked,
  );
  void loadGroup();
  void loadParked();
  const timer = window.setInterval(() => void loadGroup(), REFRESH_MS);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}
