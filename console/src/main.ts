// The console's shell: sign-in, the header and navigation, and a hash
// router that renders one page at a time. Each page returns a function
// that stops its timers and streams when the user leaves it.

import { CALL_TIMEOUT, describeError, namespaceOf, session } from "./api";
import { h, replace } from "./ui";
import { clusterPage } from "./pages/cluster";
import { namespacesPage } from "./pages/namespaces";
import { streamsPage } from "./pages/streams";
import { tailPage } from "./pages/tail";
import { appendPage } from "./pages/append";
import { queryPage } from "./pages/query";
import { groupsPage } from "./pages/groups";
import { retentionPage } from "./pages/retention";
import { metricsPage } from "./pages/metrics";

export type Page = (root: HTMLElement, args: string[]) => () => void;

interface Route {
  path: string;
  title: string;
  page: Page;
  admin?: boolean;
}

const routes: Route[] = [
  { path: "cluster", title: "Cluster", page: clusterPage, admin: true },
  { path: "namespaces", title: "Namespaces", page: namespacesPage },
  { path: "streams", title: "Streams", page: streamsPage },
  { path: "query", title: "Query", page: queryPage },
  { path: "tail", title: "Live tail", page: tailPage },
  { path: "append", title: "Append", page: appendPage },
  { path: "groups", title: "Groups", page: groupsPage },
  { path: "retention", title: "Retention", page: retentionPage },
  { path: "metrics", title: "Metrics", page: metricsPage },
];

const app = document.getElementById("app")!;
let stop: () => void = () => {};

function signInView() {
  const input = h("input", { id: "token", type: "password", autocomplete: "off", placeholder: "ns_…", size: 60, required: true });
  const err = h("pre", { id: "signin-error", class: "error", hidden: true });
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const token = input.value.trim();
    session.signIn(token);
    try {
      const ns = namespaceOf(token);
      if (ns === "default") await session.call((c) => c.cluster.status({}, { timeoutMs: CALL_TIMEOUT }));
      else await session.call((c) => c.namespaces.get({ name: ns ?? "" }, { timeoutMs: CALL_TIMEOUT }));
    } catch (e) {
      session.signOut();
      err.textContent = describeError(e);
      err.hidden = false;
      return;
    }
    location.hash = session.admin ? "#/cluster" : "#/streams";
    render();
  };
  replace(
    app,
    h(
      "form",
      { id: "signin", class: "card signin", onsubmit: submit },
      h("h1", null, "Skald console"),
      h("p", null, "Sign in with the admin token (everything) or a namespace token (that namespace). The token stays in this tab's session storage."),
      h("label", null, "Token ", input),
      h("button", { type: "submit", id: "signin-button" }, "Sign in"),
      err,
    ),
  );
  input.focus();
}

const nodeInfo = h("span", { id: "node-info", class: "muted" });

// versionInfo is the serving node's Skald version (GET /version, no
// token), with its revision, Go release and EventoDB API level on hover.
const versionInfo = h("span", { id: "version", class: "muted small" });
let versionAsked = false;
function showVersion() {
  if (versionAsked) return;
  versionAsked = true;
  fetch(`${session.base}/version`).then(
    async (r) => {
      const v = (await r.json()) as { version?: string; revision?: string; modified?: boolean; go?: string; eventodb?: string };
      if (!v.version) return;
      const rev = v.revision ? `revision ${v.revision.slice(0, 12)}${v.modified ? "-modified" : ""}, ` : "";
      versionInfo.textContent = v.version;
      versionInfo.title = `Skald ${v.version} (${rev}${v.go ?? ""}); EventoDB API ${v.eventodb ?? ""}`;
    },
    () => {
      versionAsked = false; // try again on the next page
    },
  );
}
function showNodes() {
  const down = session.down.size;
  replace(
    nodeInfo,
    "via ",
    h("code", { id: "node-current" }, session.base.replace(/^https?:\/\//, "")),
    down ? h("span", { class: "bad", id: "nodes-down" }, ` · ${down} down`) : null,
  );
}
session.onNodesChange = showNodes;

function actingSelect(): HTMLElement | null {
  const names = [session.namespace, ...Object.keys(session.nsTokens).filter((n) => n !== session.namespace)];
  if (names.length < 2) return h("span", { class: "muted", title: "the namespace the data pages act on" }, "ns ", h("code", { id: "acting" }, session.acting));
  const sel = h(
    "select",
    {
      id: "acting-select",
      onchange: () => {
        session.acting = sel.value;
        render();
      },
    },
    names.map((n) => h("option", { value: n, selected: n === session.acting }, n)),
  );
  return h("label", { class: "muted", title: "the namespace the data pages act on" }, "ns ", sel);
}

function render() {
  stop();
  stop = () => {};
  if (!session.token) {
    // Signing out renders the form and then the hash change renders
    // again: keep the form (and what was typed into it) that is there.
    if (!document.getElementById("signin")) signInView();
    return;
  }
  const [path, ...args] = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const visible = routes.filter((r) => !r.admin || session.admin);
  const route = visible.find((r) => r.path === path) ?? visible[0];
  const main = h("main", { id: "page" });
  replace(
    app,
    h(
      "header",
      null,
      h("strong", null, "Skald"),
      versionInfo,
      h(
        "nav",
        null,
        visible.map((r) => h("a", { href: `#/${r.path}`, id: `nav-${r.path}`, class: r === route ? "active" : null }, r.title)),
      ),
      h("span", { class: "spacer" }),
      actingSelect(),
      nodeInfo,
      h(
        "button",
        {
          id: "signout",
          onclick: () => {
            session.signOut();
            location.hash = "";
            render();
          },
        },
        "Sign out",
      ),
    ),
    main,
  );
  showNodes();
  document.title = `${route.title} · Skald`;
  stop = route.page(main, args);
  learnMembers();
  showVersion();
}

// learnMembers asks once per load for the members' API addresses (admin
// only), so any page can move to another node when its own goes away.
let learned = false;
function learnMembers() {
  if (learned || !session.admin) return;
  learned = true;
  session.call((c) => c.cluster.status({}, { timeoutMs: CALL_TIMEOUT })).then(
    (st) => session.setMembers(st.servers.map((s) => s.apiAddress)),
    () => {
      learned = false; // try again on the next page
    },
  );
}

window.addEventListener("hashchange", render);
render();
