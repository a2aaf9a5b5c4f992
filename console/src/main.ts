// The console's shell: sign-in, the header and navigation, and a hash
// router that renders one page at a time. Each page returns a function
// that stops its timers and streams when the user leaves it.

import { Code, ConnectError } from "@connectrpc/connect";
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
import { indexesPage } from "./pages/indexes";
import { credentialsPage } from "./pages/credentials";
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
  { path: "indexes", title: "Indexes", page: indexesPage },
  { path: "retention", title: "Retention", page: retentionPage },
  { path: "credentials", title: "Credentials", page: credentialsPage },
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
    const ns = namespaceOf(token);
    // An admin credential (only in default) is one Cluster.Status
    // answers; any other is checked with Namespaces.Get of its own
    // namespace (a reader of default too).
    let admin = ns === "default";
    session.signIn(token, admin);
    try {
      if (admin) {
        try {
          await session.call((c) => c.cluster.status({}, { timeoutMs: CALL_TIMEOUT }));
        } catch (e) {
          if (ConnectError.from(e).code !== Code.PermissionDenied) throw e;
          admin = false;
          session.signIn(token, admin);
        }
      }
      if (!admin) await session.call((c) => c.namespaces.get({ name: ns ?? "" }, { timeoutMs: CALL_TIMEOUT }));
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
      h("p", null, "Sign in with an admin token (every namespace and the cluster) or a namespace token (that namespace, as far as its role allows). The token stays in this tab's session storage."),
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

// actingView names the namespace the data pages act on; the admin
// changes it with "Work in" on the Namespaces page.
function actingView(): HTMLElement {
  const name = h("code", { id: "acting" }, session.acting);
  return h(
    "span",
    { class: "muted", title: session.admin ? "the namespace the data pages act on (Work in on the Namespaces page changes it)" : "the namespace the data pages act on" },
    "ns ",
    session.admin ? h("a", { href: "#/namespaces", id: "acting-link" }, name) : name,
  );
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
      actingView(),
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
