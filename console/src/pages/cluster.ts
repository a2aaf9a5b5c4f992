// Cluster: every member as the serving node reports it (suffrage, health,
// last contact) beside each member's own view, asked of that member
// directly (term, commit and applied index), refreshed every second. A
// member that does not answer shows as down. Admin only. Servers are
// named by their --node-name: the serving node's word, else the member's
// own (each names itself in its Status), the id only when neither knows.

import type { Duration } from "@bufbuild/protobuf/wkt";
import { CALL_TIMEOUT, describeError, session } from "../api";
import { Suffrage, type Server, type StatusResponse } from "../gen/skald/v1/cluster_pb";
import { confirmDialog, h, replace } from "../ui";

const REFRESH_MS = 1000;

function ms(d: Duration | undefined): string {
  if (!d) return "—";
  const v = Number(d.seconds) * 1000 + d.nanos / 1e6;
  return v === 0 ? "0" : v < 10 ? `${v.toFixed(1)} ms` : `${Math.round(v)} ms`;
}

/** names maps server ids to names learnt from any member's Status (kept across refreshes). */
const names = new Map<string, string>();

/** learnNames records the names a Status gives: every server's, and the serving node's own. */
function learnNames(st: StatusResponse) {
  for (const s of st.servers) if (s.name) names.set(s.id, s.name);
}

/** label names a server: its name, else the start of its id (when no member knows its name). */
const label = (s: Server | undefined, id = "") => {
  const sid = s?.id ?? id;
  return s?.name || names.get(sid) || sid.slice(0, 8) || "none";
};

/**
 * health is "down" when the server did not answer the console, else the
 * serving node's view: "unreachable" when it could not ask the server,
 * otherwise autopilot's verdict (on a follower, autopilot's rule applied
 * to what the servers report, so every node shows the same picture).
 */
function health(s: Server, v: View | undefined): HTMLElement {
  if (!v?.ok) return h("span", { class: "bad", title: v && !v.ok ? v.err : "" }, "down");
  if (s.unreachable) return h("span", { class: "bad", title: "the serving node could not reach it" }, "unreachable");
  if (s.healthy) return h("span", { class: "good" }, "healthy");
  return h("span", { class: "bad" }, "unhealthy");
}

type View = { ok: true; st: StatusResponse } | { ok: false; err: string };

export function clusterPage(root: HTMLElement): () => void {
  const summary = h("div", { id: "cluster-summary", class: "summary" }, "Loading…");
  const table = h("div", { id: "cluster-nodes" });
  const msg = h("pre", { id: "cluster-message", class: "message", hidden: true });
  replace(root, h("h2", null, "Cluster"), summary, table, msg);
  let stopped = false;
  let timer = 0;
  let first = true;

  const say = (text: string, error = false) => {
    msg.textContent = text;
    msg.className = error ? "message error" : "message";
    msg.hidden = false;
  };

  const base = (addr: string) => `${location.protocol}//${addr}`;

  const act = async (what: string, f: () => Promise<string>) => {
    try {
      say(`${what}…`);
      say(await f());
    } catch (e) {
      say(`${what} failed: ${describeError(e)}`, true);
    }
    void refresh();
  };

  const actions = (s: Server, st: StatusResponse, leader: Server | undefined, up: boolean) => {
    const isLeader = s.id === st.leaderId;
    // Only a voter that answers (and that the serving node can reach)
    // can take leadership; a down node is offered removal only.
    const canLead = isLeader || (up && !s.unreachable && s.suffrage !== Suffrage.NONVOTER);
    const transfer = () =>
      act("Transferring leadership", async () => {
        if (!leader) throw new Error("no leader is known");
        const to = isLeader ? undefined : s.id;
        const r = await session.clientsFor(base(leader.apiAddress), false).cluster.transferLeadership({ toId: to }, { timeoutMs: 15000 });
        return `Leadership transferred to ${label(st.servers.find((x) => x.id === r.leaderId), r.leaderId)}.`;
      });
    const remove = async () => {
      if (!(await confirmDialog(`Remove ${label(s)} (${s.apiAddress}) from the cluster? It stops being a Raft member.`, "Remove server"))) return;
      void act(`Removing ${label(s)}`, async () => {
        await session.call((c) => c.cluster.removeServer({ id: s.id }, { timeoutMs: 15000 }), { write: true });
        return `Removed ${label(s)}.`;
      });
    };
    const doTransfer = async () => {
      const q = isLeader ? `Hand leadership from ${label(s)} to another voter?` : `Make ${label(s)} the leader?`;
      if (await confirmDialog(q, "Transfer leadership")) void transfer();
    };
    return h(
      "td",
      { class: "actions" },
      canLead ? h("button", { class: "transfer", "data-id": s.id, onclick: doTransfer }, isLeader ? "Transfer leadership" : "Make leader") : null,
      h("button", { class: "remove danger", "data-id": s.id, onclick: remove }, "Remove"),
    );
  };

  const draw = (st: StatusResponse, views: Map<string, View>) => {
    const leader = st.servers.find((s) => s.id === st.leaderId);
    const self = st.servers.find((s) => s.id === st.nodeId);
    replace(
      summary,
      h("span", null, "Leader ", h("strong", { id: "cluster-leader", "data-id": st.leaderId }, label(leader, st.leaderId))),
      h("span", null, "Term ", h("strong", { id: "cluster-term" }, st.term)),
      h("span", null, "Commit index ", h("strong", null, st.commitIndex)),
      h("span", null, "Applied index ", h("strong", null, st.appliedIndex)),
      h("span", { class: "muted" }, `as seen by ${label(self, st.nodeId)}`),
    );
    const servers = [...st.servers].sort((a, b) => a.apiAddress.localeCompare(b.apiAddress) || a.id.localeCompare(b.id));
    const rows = servers.map((s) => {
      const v = views.get(s.id);
      const up = v?.ok === true;
      const own = v?.ok ? v.st : undefined;
      const role = s.id === st.leaderId ? "leader" : s.suffrage === Suffrage.NONVOTER ? "non-voter" : "follower";
      return h(
        "tr",
        { class: !up ? "down" : !s.healthy ? "warn" : "", "data-id": s.id, "data-role": role },
        h("td", { class: "name", title: `id ${s.id}` }, h("strong", null, label(s))),
        h("td", { "data-label": "API" }, h("code", null, s.apiAddress || "—")),
        h("td", { class: "role", "data-label": "Role" }, role),
        h("td", { class: "health", "data-label": "Health" }, health(s, v)),
        h("td", { class: "num", "data-label": "Last contact" }, ms(s.lastContact)),
        h("td", { class: "num", "data-label": "Term" }, own ? own.term : "—"),
        h("td", { class: "num", "data-label": "Commit" }, own ? own.commitIndex : "—"),
        h("td", { class: "num", "data-label": "Applied" }, own ? own.appliedIndex : s.appliedIndex || "—"),
        actions(s, st, leader, up),
      );
    });
    replace(
      table,
      h(
        "table",
        { id: "cluster-table", class: "cards" },
        h("thead", null, h("tr", null, ["Node", "API address", "Role", "Health", "Last contact", "Term", "Commit index", "Applied index", ""].map((t, i) => h("th", { class: i >= 4 && i <= 7 ? "num" : null }, t)))),
        h("tbody", null, rows),
      ),
    );
    if (first) {
      first = false;
      document.body.dataset.clusterRendered = String(performance.now());
    }
  };

  const refresh = async () => {
    window.clearTimeout(timer);
    try {
      const st = await session.call((c) => c.cluster.status({}, { timeoutMs: CALL_TIMEOUT }));
      learnNames(st);
      session.setMembers(st.servers.map((s) => s.apiAddress));
      const views = new Map<string, View>();
      await Promise.all(
        st.servers.map(async (s) => {
          if (!s.apiAddress) return;
          try {
            const own = await session.clientsFor(base(s.apiAddress), false).cluster.status({}, { timeoutMs: REFRESH_MS * 1.5 });
            views.set(s.id, { ok: true, st: own });
            learnNames(own);
          } catch (e) {
            views.set(s.id, { ok: false, err: describeError(e) });
          }
        }),
      );
      if (stopped) return;
      draw(st, views);
    } catch (e) {
      if (stopped) return;
      replace(summary, h("pre", { class: "error" }, describeError(e)));
    }
    if (!stopped) timer = window.setTimeout(refresh, REFRESH_MS);
  };
  void refresh();
  return () => {
    stopped = true;
    window.clearTimeout(timer);
  };
}
