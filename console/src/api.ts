// The session (token, the namespace acted on, the nodes) and the API
// clients. Calls go to the node the console was loaded from; when that
// node stops answering, reads move to another member (Cluster.Status
// lists their API addresses) and the console keeps working there.

import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { Cluster } from "./gen/skald/v1/cluster_pb";
import { Credentials } from "./gen/skald/v1/credentials_pb";
import { EventStore } from "./gen/skald/v1/event_store_pb";
import { Indexes } from "./gen/skald/v1/indexes_pb";
import { Namespaces, type NamespaceInfo } from "./gen/skald/v1/namespaces_pb";
import { Subscriptions } from "./gen/skald/v1/subscriptions_pb";
import { ConditionFailedSchema, DuplicateMessageIdSchema, VersionConflictSchema, VersionConflictsSchema } from "./gen/skald/v1/types_pb";

const TOKEN_KEY = "skald.token"; // the sign-in token: sessionStorage only
const ADMIN_KEY = "skald.admin"; // "1" when the sign-in token is an admin credential
const ACT_KEY = "skald.acting"; // the namespace the data pages act on
const NODES_KEY = "skald.nodes";

/** NAMESPACE_HEADER names the namespace an admin credential's call acts on. */
export const NAMESPACE_HEADER = "Skald-Namespace";

export interface Clients {
  cluster: Client<typeof Cluster>;
  credentials: Client<typeof Credentials>;
  events: Client<typeof EventStore>;
  indexes: Client<typeof Indexes>;
  namespaces: Client<typeof Namespaces>;
  subscriptions: Client<typeof Subscriptions>;
  base: string;
}

/** namespaceOf reads the namespace a token names (ns_<base64url(name)>_<hex>). */
export function namespaceOf(token: string): string | undefined {
  const m = /^ns_([A-Za-z0-9_-]+)_[0-9a-f]{64}$/.exec(token.trim());
  if (!m) return undefined;
  try {
    const b64 = m[1].replace(/-/g, "+").replace(/_/g, "/");
    return new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
}

class Session {
  private clients = new Map<string, Clients>();
  /** Base URLs of the members, the page's own first. */
  nodes: string[] = [location.origin];
  /** Index in nodes of the node calls go to. */
  current = 0;
  /** Nodes that did not answer the last call sent to them. */
  down = new Set<string>();
  /** Called when the node in use or the set of down nodes changes. */
  onNodesChange: () => void = () => {};

  constructor() {
    const saved = sessionStorage.getItem(NODES_KEY);
    if (saved) {
      try {
        const list = JSON.parse(saved) as string[];
        this.nodes = [location.origin, ...list.filter((n) => n !== location.origin)];
      } catch {
        /* ignore a damaged entry */
      }
    }
  }

  get token(): string | null {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  /** The namespace of the sign-in token ("default" for the admin). */
  get namespace(): string {
    return namespaceOf(this.token ?? "") ?? "";
  }

  /**
   * admin says the sign-in token is an admin credential (Cluster.Status
   * answered it at sign-in): it acts on any namespace by naming it. A
   * session signed in by an older console (no record) goes by the
   * token's namespace, as that console did.
   */
  get admin(): boolean {
    const v = sessionStorage.getItem(ADMIN_KEY);
    return v === null ? this.namespace === "default" : v === "1";
  }

  /**
   * The namespace the data pages (streams, tail, append, groups, indexes,
   * credentials) act on: any namespace for the admin, which names it in
   * the Skald-Namespace header (no other token needed); a namespace
   * credential's own otherwise.
   */
  get acting(): string {
    const a = sessionStorage.getItem(ACT_KEY);
    return a && this.admin ? a : this.namespace;
  }

  set acting(name: string) {
    sessionStorage.setItem(ACT_KEY, name);
  }

  /** forgetNamespace stops acting on a namespace that was deleted. */
  forgetNamespace(name: string) {
    if (this.acting === name) sessionStorage.removeItem(ACT_KEY);
  }

  signIn(token: string, admin: boolean) {
    sessionStorage.setItem(TOKEN_KEY, token.trim());
    sessionStorage.setItem(ADMIN_KEY, admin ? "1" : "0");
  }

  signOut() {
    for (const k of [TOKEN_KEY, ADMIN_KEY, ACT_KEY, NODES_KEY]) sessionStorage.removeItem(k);
  }

  /** setMembers records the members' API addresses from Cluster.Status. */
  setMembers(addrs: string[]) {
    const proto = location.protocol;
    const bases = addrs.filter((a) => a).map((a) => `${proto}//${a}`);
    const cur = this.base;
    const next = [location.origin, ...bases.filter((b) => b !== location.origin)];
    if (next.join() === this.nodes.join()) return;
    this.nodes = next;
    this.current = Math.max(0, next.indexOf(cur));
    sessionStorage.setItem(NODES_KEY, JSON.stringify(next));
    this.onNodesChange();
  }

  get base(): string {
    return this.nodes[this.current] ?? location.origin;
  }

  /**
   * clientsFor returns clients for one node, with the sign-in token. Data
   * clients act on the acting namespace: the admin's name it in the
   * Skald-Namespace header.
   */
  clientsFor(base: string, data: boolean): Clients {
    const key = base + (data ? "\u0000data" : "");
    let c = this.clients.get(key);
    if (!c) {
      const auth: Interceptor = (next) => (req) => {
        req.header.set("Authorization", `Bearer ${this.token ?? ""}`);
        if (data && this.admin && this.acting !== this.namespace) req.header.set(NAMESPACE_HEADER, this.acting);
        return next(req);
      };
      const transport = createConnectTransport({ baseUrl: base, useBinaryFormat: true, interceptors: [auth] });
      c = {
        base,
        cluster: createClient(Cluster, transport),
        credentials: createClient(Credentials, transport),
        events: createClient(EventStore, transport),
        indexes: createClient(Indexes, transport),
        namespaces: createClient(Namespaces, transport),
        subscriptions: createClient(Subscriptions, transport),
      };
      this.clients.set(key, c);
    }
    return c;
  }

  private mark(base: string, up: boolean) {
    const was = this.down.has(base);
    if (up) this.down.delete(base);
    else this.down.add(base);
    if (was === up) this.onNodesChange();
  }

  /**
   * call runs f against the node in use; when that node does not answer
   * and the call is safe to repeat (a read), it tries the other members
   * in turn and keeps using the first that answers. Writes are sent once:
   * a write whose node went away may have been applied.
   */
  async call<T>(f: (c: Clients) => Promise<T>, opts: { data?: boolean; write?: boolean } = {}): Promise<T> {
    const order = this.nodes.map((_, i) => (this.current + i) % this.nodes.length);
    let last: unknown;
    for (const i of order) {
      const base = this.nodes[i];
      try {
        const r = await f(this.clientsFor(base, opts.data ?? false));
        this.mark(base, true);
        if (i !== this.current) {
          this.current = i;
          this.onNodesChange();
        }
        return r;
      } catch (e) {
        if (!unreachable(e)) {
          this.mark(base, true);
          throw e;
        }
        this.mark(base, false);
        last = e;
        if (opts.write) {
          // Move on for the next call, but do not repeat this one.
          this.current = (i + 1) % this.nodes.length;
          this.onNodesChange();
          throw e;
        }
      }
    }
    throw last;
  }
}

/** unreachable reports whether e says the node did not answer at all. */
export function unreachable(e: unknown): boolean {
  const ce = ConnectError.from(e);
  if (ce.code === Code.DeadlineExceeded) return true;
  // fetch rejects with a TypeError when it cannot connect.
  return ce.code === Code.Unknown && (ce.cause instanceof TypeError || /fetch|network/i.test(ce.rawMessage));
}

export const session = new Session();

/**
 * listNamespaces reads every namespace (admin), following
 * Namespaces.List's cursor a page of 1000 at a time.
 */
export async function listNamespaces(): Promise<NamespaceInfo[]> {
  const out: NamespaceInfo[] = [];
  let cursor = "";
  for (;;) {
    const r = await session.call((c) => c.namespaces.list({ cursor }, { timeoutMs: CALL_TIMEOUT }));
    out.push(...r.namespaces);
    if (!r.nextCursor || r.nextCursor === cursor) return out;
    cursor = r.nextCursor;
  }
}

/** Timeout for unary calls, so a node that hangs counts as down. */
export const CALL_TIMEOUT = 4000;

/** codeName is the Connect name of a code (aborted, failed_precondition, …). */
export function codeName(code: Code): string {
  return (Code[code] ?? String(code)).replace(/[A-Z]/g, (c, i) => (i ? "_" : "") + c.toLowerCase());
}

/**
 * describeError says what the API said, once: the code and the message,
 * then only what the details add to it (the message already names the
 * field of a violation and the versions of a conflict, so a detail that
 * repeats it is left out).
 */
export function describeError(e: unknown): string {
  const ce = ConnectError.from(e);
  const msg = ce.rawMessage;
  const lines = [`${codeName(ce.code)}: ${msg}`];
  const add = (line: string, ...known: string[]) => {
    if (!known.every((k) => msg.includes(k))) lines.push(line);
  };
  for (const vc of ce.findDetails(VersionConflictSchema)) {
    add(`version conflict on ${vc.stream}: expected version ${vc.expectedVersion}, actual version ${vc.actualVersion}`, vc.stream, String(vc.expectedVersion), String(vc.actualVersion));
  }
  for (const vcs of ce.findDetails(VersionConflictsSchema)) {
    for (const vc of vcs.conflicts) add(`version conflict on ${vc.stream}: expected version ${vc.expectedVersion}, actual version ${vc.actualVersion}`, vc.stream, String(vc.expectedVersion), String(vc.actualVersion));
  }
  for (const cf of ce.findDetails(ConditionFailedSchema)) {
    add(`condition failed: a matching message at global position ${cf.globalPosition}, after ${cf.after}`, String(cf.globalPosition));
  }
  for (const d of ce.findDetails(DuplicateMessageIdSchema)) {
    add(`message id ${d.id} was written to ${d.stream} at position ${d.position} (global position ${d.globalPosition})`, d.id, d.stream);
  }
  for (const d of ce.details) {
    if ("type" in d && d.type === "google.rpc.BadRequest") {
      for (const [field, desc] of fieldViolations(d.value)) add(`${field}: ${desc}`, `${field}: ${desc}`);
    }
  }
  return lines.join("\n");
}

/** fieldViolations decodes google.rpc.BadRequest (field_violations = 1 {field = 1, description = 2}). */
function fieldViolations(b: Uint8Array): [string, string][] {
  const out: [string, string][] = [];
  try {
    const r = new BinaryReader(b);
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no !== 1) {
        r.skip(wt);
        continue;
      }
      const v = new BinaryReader(r.bytes());
      let field = "";
      let desc = "";
      while (v.pos < v.len) {
        const [n, w] = v.tag();
        if (n === 1) field = v.string();
        else if (n === 2) desc = v.string();
        else v.skip(w);
      }
      out.push([field, desc]);
    }
  } catch {
    /* a detail we cannot read is left out; the message still shows */
  }
  return out;
}
