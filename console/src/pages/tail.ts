// Live tail: Subscribe to a stream, a category or the whole namespace.
// Stored messages arrive first, then "caught up", then each new one as it
// is applied, added at the bottom: oldest first, as the stream and
// category views list them. Pause holds new messages back without
// dropping them; when the node goes away the tail resumes on another from
// where it was.

import { ConnectError, Code } from "@connectrpc/connect";
import { describeError, session } from "../api";
import type { SubscribeRequest } from "../gen/skald/v1/event_store_pb";
import type { Message } from "../gen/skald/v1/types_pb";
import { messageView } from "../messages";
import { h, replace } from "../ui";

const KEEP = 500; // messages kept on the page; the oldest are dropped

type Kind = "stream" | "category" | "all";

export function tailPage(root: HTMLElement, args: string[]): () => void {
  const kind = h("select", { id: "tail-kind" }, ["stream", "category", "all"].map((k) => h("option", { value: k, selected: k === (args[0] ?? "stream") }, k)));
  const name = h("input", { id: "tail-name", placeholder: "account-123 or account", size: 30, value: args[1] ?? "" });
  const from = h("input", { id: "tail-from", type: "number", min: 0, value: "0", size: 8 });
  const startBtn = h("button", { id: "tail-start", type: "submit" }, "Start");
  const pauseBtn = h("button", { id: "tail-pause", type: "button", disabled: true }, "Pause");
  const status = h("div", { id: "tail-status", class: "muted" }, "Not subscribed.");
  const list = h("div", { id: "tail-messages" });
  let abort: AbortController | null = null;
  let paused = false;
  let held: Message[] = [];

  const show = (m: Message) => {
    // Follow the newest message when the page was already at the bottom.
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 8;
    list.append(messageView(m, kind.value !== "stream"));
    while (list.childElementCount > KEEP) list.firstElementChild?.remove();
    if (atBottom && !paused) list.lastElementChild?.scrollIntoView({ block: "end" });
  };

  const setStatus = (...c: (Node | string)[]) => replace(status, ...c);

  const stopTail = () => {
    abort?.abort();
    abort = null;
    startBtn.textContent = "Start";
    pauseBtn.disabled = true;
  };

  const start = async (ev: Event) => {
    ev.preventDefault();
    if (abort) {
      stopTail();
      setStatus("Stopped.");
      return;
    }
    const k = kind.value as Kind;
    const target: SubscribeRequest["target"] = k === "stream" ? { case: "stream", value: name.value.trim() } : k === "category" ? { case: "category", value: name.value.trim() } : { case: "all", value: true };
    // next is where to resume: updated with every message, so a retry on
    // another node neither skips nor repeats.
    let next = BigInt(from.value || "0");
    const ctl = new AbortController();
    abort = ctl;
    replace(list);
    held = [];
    paused = false;
    pauseBtn.textContent = "Pause";
    startBtn.textContent = "Stop";
    pauseBtn.disabled = false;
    setStatus("Subscribing…");
    try {
      await session.call(
        async (c) => {
          setStatus("Catching up via ", h("code", null, c.base.replace(/^https?:\/\//, "")), "…");
          const req = { target, position: k === "stream" ? next : 0n, globalPosition: k === "stream" ? 0n : next };
          for await (const r of c.events.subscribe(req, { signal: ctl.signal })) {
            switch (r.event.case) {
              case "message": {
                const m = r.event.value;
                next = (k === "stream" ? m.position : m.globalPosition) + 1n;
                if (paused) held.push(m);
                else show(m);
                break;
              }
              case "caughtUp":
                setStatus(h("span", { id: "tail-caught-up", class: "good" }, "Live"), ` · caught up at index ${r.event.value.appliedIndex} via `, h("code", null, c.base.replace(/^https?:\/\//, "")));
                break;
              case "heartbeat":
                break;
            }
          }
        },
        { data: true },
      );
      setStatus("The server ended the subscription.");
    } catch (e) {
      if (ctl.signal.aborted || ConnectError.from(e).code === Code.Canceled) return;
      setStatus(h("pre", { class: "error" }, describeError(e)));
    } finally {
      if (abort === ctl) stopTail();
    }
  };

  pauseBtn.addEventListener("click", () => {
    paused = !paused;
    pauseBtn.textContent = paused ? "Resume" : "Pause";
    if (!paused) {
      for (const m of held) show(m);
      held = [];
    }
    pauseCount();
  });
  const pauseCount = () => {
    const info = status.querySelector(".held") ?? status.appendChild(h("span", { class: "held" }));
    info.textContent = paused ? ` · paused, ${held.length} held` : "";
  };
  const ticker = window.setInterval(() => paused && pauseCount(), 500);

  replace(
    root,
    h("h2", null, "Live tail in ", h("code", null, session.acting)),
    h("form", { id: "tail-form", class: "inline card", onsubmit: start }, h("label", null, "Target ", kind), h("label", null, "Name ", name), h("label", null, "From position ", from), startBtn, pauseBtn),
    status,
    list,
  );
  if (args[1] || args[0] === "all") startBtn.click();
  return () => {
    window.clearInterval(ticker);
    stopTail();
  };
}
