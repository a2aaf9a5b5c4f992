package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/buildinfo"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/rpc"
	"github.com/skalddb/skald/tests/testcluster"
)

// The browser tests drive a real headless Chromium through the console
// served by a real in-process 3-node cluster. They skip when no Chromium
// is installed, unless SKALD_CONSOLE_BROWSER=required (CI sets it and
// installs Debian's chromium). With
// SKALD_CONSOLE_SCREENSHOTS=1 they also write the README's screenshots to
// console/screenshots/.

// stepTimeout bounds every step: a wait in the browser, a navigation, a
// click.
const stepTimeout = 20 * time.Second

// chromium finds the browser: $SKALD_CHROMIUM, else the usual names on PATH.
func chromium() string {
	if p := os.Getenv("SKALD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromium()
	if exe == "" && os.Getenv("SKALD_CONSOLE_BROWSER") == "required" {
		t.Fatal("no Chromium found, and SKALD_CONSOLE_BROWSER=required (CI installs Debian's chromium)")
	}
	if exe == "" {
		t.Skip("no Chromium found (install Debian's chromium, or set SKALD_CHROMIUM): skipping the console's browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1000, 650),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// Start the browser now, so its start-up is not charged to a step.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int]("1")); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	// The page's exceptions and console errors go to the test log.
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || m.Type == "error" {
				t.Logf("browser console %s: %s", m.Type, m.Text)
			}
		}
	}()
	return &browser{t: t, ctx: ctx}
}

// do runs the steps within stepTimeout, failing the test with what.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\npage text: %s", what, err, b.pageText())
	}
}

// wait polls a JavaScript predicate until it is true, within stepTimeout.
func (b *browser) wait(what, predicate string) {
	b.t.Helper()
	b.do("waiting for "+what, chromedp.Steps(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool]("!!("+predicate+")", chromedp.WithPollingTimeout(stepTimeout), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return err
	})))
}

// js runs a statement in the page (clicks on elements that a refresh may
// replace are done this way: at once, with no query in between).
func (b *browser) js(what, stmt string) {
	b.t.Helper()
	b.do(what, chromedp.Evaluate[chromedp.Void](stmt))
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// pageText is the visible text of the page, for failure messages.
func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
	if err != nil {
		return "(unavailable: " + err.Error() + ")"
	}
	return s
}

func (b *browser) hash(h string) {
	b.t.Helper()
	b.js("open "+h, fmt.Sprintf("location.hash = %q", h))
}

// screenshot writes the viewport to console/screenshots/name.png when
// SKALD_CONSOLE_SCREENSHOTS is set.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("SKALD_CONSOLE_SCREENSHOTS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("screenshots", name+".png")
	if err := os.MkdirAll("screenshots", 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote %s (%d bytes)", path, len(png))
}

// signIn types token into the sign-in form and submits it.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.do("sign in", chromedp.WaitVisible(chromedp.ID("token")), chromedp.SetValue(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin-button")))
}

// appendAs appends messages through the API, as a program would: one
// by default, or count of them in one call.
func appendAs(t *testing.T, addr, token, stream, typ, data string, count ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	c := skaldv1connect.NewEventStoreClient(http.DefaultClient, "http://"+addr)
	msgs := []*skaldv1.NewMessage{{Type: typ, Data: []byte(data)}}
	for len(count) > 0 && len(msgs) < count[0] {
		msgs = append(msgs, &skaldv1.NewMessage{Type: typ, Data: []byte(data)})
	}
	req := connect.NewRequest(&skaldv1.AppendRequest{Stream: stream, Messages: msgs})
	req.Header().Set("Authorization", "Bearer "+token)
	if _, err := c.Append(ctx, req); err != nil {
		t.Fatalf("append %s to %s: %v", typ, stream, err)
	}
}

// startNamed is testcluster.Start with a --node-name on every member
// (skald-1, skald-2, …, by start order, kept across restarts), as a real
// cluster has. No member gossips the others' names here, so each server's
// own Status is the only one to name it: the console must learn the names
// from every member (issue 32: names, not UUIDs).
func startNamed(t *testing.T, size int) *testcluster.Cluster {
	t.Helper()
	var mu sync.Mutex
	names := map[string]string{} // API address -> name
	api := func(tn *node.TestNode) http.Handler {
		mu.Lock()
		name, ok := names[tn.Addr]
		if !ok {
			name = fmt.Sprintf("skald-%d", len(names)+1)
			names[tn.Addr] = name
		}
		mu.Unlock()
		return rpc.NewHandler(tn.Node, rpc.Options{Registerer: tn.Registry, Gatherer: tn.Registry, NodeName: name})
	}
	config := func(i int, cfg *node.Config) {
		cfg.LeaderWait, cfg.ReadWait = 5*time.Second, 5*time.Second
		cfg.RetentionInterval = 100 * time.Millisecond
	}
	c := &testcluster.Cluster{TestCluster: node.StartTestCluster(t, size, node.TestClusterOptions{Config: config, Handler: api})}
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.Timeout)
	defer cancel()
	if _, err := c.Leader().CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: nstoken.AdminNamespace, TokenHash: nstoken.Hash(testcluster.AdminToken)}); err != nil {
		t.Fatalf("create the admin namespace: %v", err)
	}
	c.WaitConverged()
	return c
}

func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	c := startNamed(t, 3)
	n0 := c.Nodes[0] // the console's own node
	ids := map[string]bool{}
	for _, n := range c.Nodes {
		ids[n.ID()] = true
	}
	origin := "http://" + n0.Addr

	// A bad token is refused with the API's word, and not kept.
	b.do("open the console", chromedp.Navigate(origin+"/ui/"))
	weight := eval[struct{ Encoded, Decoded, Files int }](b, `(() => {
		const es = [performance.getEntriesByType("navigation")[0], ...performance.getEntriesByType("resource").filter((r) => r.initiatorType !== "fetch")];
		return { encoded: es.reduce((a, e) => a + e.encodedBodySize, 0), decoded: es.reduce((a, e) => a + e.decodedBodySize, 0), files: es.length };
	})()`)
	t.Logf("page weight: %d bytes as sent (gzip) in %d files, %d bytes decoded", weight.Encoded, weight.Files, weight.Decoded)
	b.signIn("ns_ZGVmYXVsdA_" + strings.Repeat("1", 64))
	b.wait("the bad token refused", `document.querySelector("#signin-error:not([hidden])")?.textContent.includes("unauthenticated")`)
	if kept := eval[*string](b, `sessionStorage.getItem("skald.token")`); kept != nil {
		t.Fatalf("a refused token was kept: %q", *kept)
	}

	// The admin signs in and sees the cluster: three nodes, the leader.
	b.signIn(testcluster.AdminToken)
	b.wait("the cluster page", `document.querySelectorAll("#cluster-table tbody tr").length === 3 && document.querySelector("#cluster-leader")?.dataset.id`)
	// The header shows the serving node's version (GET /version).
	b.wait("the version in the header", fmt.Sprintf(`document.querySelector("#version")?.textContent === %q && document.querySelector("#version").title.includes("EventoDB API %s")`, buildinfo.Version, buildinfo.EventoDBAPI))
	if leader := eval[string](b, `document.querySelector("#cluster-leader").dataset.id`); !ids[leader] {
		t.Fatalf("the page shows leader %q, not a member", leader)
	}
	// First render of the cluster page on a load with the token in session.
	b.do("reload", chromedp.Reload())
	b.wait("the cluster page after a reload", `document.body.dataset.clusterRendered !== undefined`)
	t.Logf("first render of the cluster page: %.0f ms after navigation start", eval[float64](b, `Number(document.body.dataset.clusterRendered)`))
	b.wait("every node's own view", `[...document.querySelectorAll("#cluster-table tbody tr")].every((tr) => tr.querySelector(".health").textContent === "healthy" && tr.children[5].textContent !== "—")`)
	// Every member by its name, none by its id (only the serving node
	// names the others when gossip does; here each names itself).
	b.wait("every node by its name", `[...document.querySelectorAll("#cluster-table tbody tr td.name")].map((td) => td.textContent).sort().join() === "skald-1,skald-2,skald-3" && /^skald-[123]$/.test(document.querySelector("#cluster-leader").textContent)`)
	b.screenshot("cluster")
	// Readable at 420 px: nothing wider than the window, each row a card
	// whose cells say what they are.
	b.do("a 420 px window", chromedp.EmulateViewport(420, 800))
	b.wait("the cluster page fits 420 px", `document.documentElement.scrollWidth <= 420 && document.querySelector("#cluster-table").getBoundingClientRect().right <= 420 && getComputedStyle(document.querySelector("#cluster-table thead")).display === "none"`)
	b.screenshot("cluster-narrow")
	b.do("back to 1000 px", chromedp.EmulateViewport(1000, 650))

	// Create a namespace: its token shows once; work in it.
	b.do("create a namespace", chromedp.Click(chromedp.ID("nav-namespaces")), chromedp.WaitVisible(chromedp.ID("ns-create")),
		chromedp.SetValue(chromedp.ID("ns-name"), "shop"), chromedp.SetValue(chromedp.ID("ns-description"), "the web shop"),
		chromedp.Click(chromedp.ID("ns-create-button")), chromedp.WaitVisible(chromedp.ID("ns-token")))
	shopToken := eval[string](b, `document.querySelector("#ns-token").textContent`)
	if !strings.HasPrefix(shopToken, "ns_c2hvcA_") {
		t.Fatalf("the new token %q is not shop's", shopToken)
	}
	b.wait("shop listed", `document.querySelector('#ns-table tr[data-ns="shop"]') !== null`)
	// Delete, after confirming.
	b.do("create a second namespace", chromedp.SetValue(chromedp.ID("ns-name"), "scratch"), chromedp.Click(chromedp.ID("ns-create-button")))
	b.wait("scratch listed", `document.querySelector('#ns-table button.delete[data-ns="scratch"]') !== null && document.querySelector("#ns-token")?.textContent.startsWith("ns_c2NyYXRjaA_")`)
	b.js("ask to delete scratch", `document.querySelector('#ns-table button.delete[data-ns="scratch"]').click()`)
	b.do("confirm", chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait("scratch deleted", `document.querySelector("#ns-message").textContent.startsWith("Deleted scratch") && document.querySelector('#ns-table tr[data-ns="scratch"]') === null && document.querySelector('#ns-table tr[data-ns="shop"]') !== null`)
	// Namespaces.List is paged: a page of one namespace at a time here.
	b.hash("#/namespaces/limit/1")
	b.wait("the first page", `document.querySelector("#ns-page")?.textContent === "namespaces 1–1" && [...document.querySelectorAll("#ns-table tbody tr")].map((tr) => tr.dataset.ns).join() === "default" && !document.querySelector("#ns-next").disabled`)
	b.do("the next page", chromedp.Click(chromedp.ID("ns-next")))
	b.wait("the second page, the last", `document.querySelector("#ns-page")?.textContent === "namespaces 2–2" && [...document.querySelectorAll("#ns-table tbody tr")].map((tr) => tr.dataset.ns).join() === "shop" && document.querySelector("#ns-next").disabled`)
	b.do("back to the first", chromedp.Click(chromedp.ID("ns-prev")))
	b.wait("the first page again", `[...document.querySelectorAll("#ns-table tbody tr")].map((tr) => tr.dataset.ns).join() === "default" && document.querySelector("#ns-prev").disabled`)
	// The admin works in shop with its own token: no other token asked.
	b.hash("#/namespaces")
	b.wait("shop on the page", `document.querySelector('#ns-table button.work[data-ns="shop"]') !== null && document.querySelector("#ns-pager").hidden`)
	b.js("work in shop", `document.querySelector('#ns-table button.work[data-ns="shop"]').click()`)
	b.wait("acting in shop", `document.querySelector("#acting")?.textContent === "shop" && document.querySelector("h2 code")?.textContent === "shop" && location.hash === "#/streams"`)

	// Append with an expected version, then a conflict shown as the API says it.
	b.hash("#/append/order-1")
	b.do("append", chromedp.WaitVisible(chromedp.ID("append-form")), chromedp.SetValue(chromedp.ID("append-type"), "Placed"),
		chromedp.SetValue(chromedp.ID("append-data"), `{"total": 42, "items": ["tea"]}`), chromedp.SetValue(chromedp.ID("append-metadata"), `{"by": "console-test"}`),
		chromedp.SetValue(chromedp.ID("append-expected"), "-1"), chromedp.Click(chromedp.ID("append-button")), chromedp.WaitVisible(chromedp.ID("append-ok")))
	b.do("append with a stale expected version", chromedp.SetValue(chromedp.ID("append-expected"), "5"), chromedp.Click(chromedp.ID("append-button")),
		chromedp.WaitVisible(chromedp.ID("append-error")))
	// The error is shown once: the API's message names the versions, and
	// the conflict detail saying it again is left out.
	if got, want := eval[string](b, `document.querySelector("#append-error").textContent`), `aborted: stream "order-1" is at version 0, expected 5`; got != want {
		t.Fatalf("conflict shown as %q, want %q", got, want)
	}
	// Invalid JSON is caught in the browser, with the parser's message, and nothing is sent.
	b.do("append invalid JSON", chromedp.Evaluate[chromedp.Void](`document.querySelector("#append-expected").value = ""`), chromedp.SetValue(chromedp.ID("append-data"), `{"total": 42,}`), chromedp.Click(chromedp.ID("append-button")),
		chromedp.WaitVisible(chromedp.ID("append-invalid")))
	if got, want := eval[string](b, `document.querySelector("#append-invalid").textContent`), eval[string](b, `(() => { try { JSON.parse('{"total": 42,}') } catch (e) { return "data is not valid JSON: " + e.message } })()`); got != want {
		t.Fatalf("invalid JSON shown as %q, want %q", got, want)
	}
	b.do("append invalid metadata", chromedp.SetValue(chromedp.ID("append-data"), `{"total": 42}`), chromedp.SetValue(chromedp.ID("append-metadata"), `[1, 2]`), chromedp.Click(chromedp.ID("append-button")))
	b.wait("the metadata refused", `document.querySelector("#append-invalid")?.textContent === "metadata: must be a JSON object, got an array"`)
	b.js("clear the metadata", `document.querySelector("#append-metadata").value = ""`)

	// The message in the stream view.
	b.hash("#/streams/stream/order-1")
	b.wait("the message in the stream view", `document.querySelector('#messages article.msg[data-type="Placed"] pre.data')?.textContent.includes('"total": 42')`)
	if meta := eval[string](b, `document.querySelector('#messages article.msg pre.metadata').textContent`); !strings.Contains(meta, `"by": "console-test"`) {
		t.Fatalf("metadata shown as %q", meta)
	}

	// Live tail of the category: the stored message, then new ones; pause holds them.
	b.hash("#/tail/category/order")
	b.wait("the tail caught up", `document.querySelector("#tail-caught-up") !== null && document.querySelector('#tail-messages article[data-type="Placed"]') !== null`)
	appendAs(t, c.Nodes[1].Addr, shopToken, "order-1", "Shipped", `{"carrier": "post"}`)
	b.wait("a new message in the tail", `document.querySelector('#tail-messages article[data-type="Shipped"]') !== null`)
	b.do("pause", chromedp.Click(chromedp.ID("tail-pause")))
	appendAs(t, c.Nodes[2].Addr, shopToken, "order-2", "Placed", `{"total": 7}`)
	b.wait("the message held while paused", `document.querySelector("#tail-status").textContent.includes("1 held")`)
	if n := eval[int](b, `document.querySelectorAll('#tail-messages article').length`); n != 2 {
		t.Fatalf("%d messages shown while paused, want 2", n)
	}
	b.do("resume", chromedp.Click(chromedp.ID("tail-pause")))
	b.wait("the held message shown", `document.querySelectorAll('#tail-messages article').length === 3`)
	// Oldest first, as the stream and category views list them.
	if gps := eval[string](b, `[...document.querySelectorAll('#tail-messages article')].map((a) => a.dataset.gp).join()`); gps != "1,2,3" {
		t.Fatalf("the tail lists global positions %s, want 1,2,3 (oldest first)", gps)
	}

	b.hash("#/streams")
	b.wait("the category listed", `document.querySelector("#categories-table tbody tr")?.textContent === "order23"`)
	b.do("search streams", chromedp.SendKeys(chromedp.ID("stream-search"), "order-2"))
	b.wait("the search result", `document.querySelectorAll("#streams-table tbody tr").length === 1 && document.querySelector("#streams-table tbody tr td").textContent === "order-2"`)
	b.hash("#/streams/category/order")
	b.wait("the category view", `document.querySelectorAll('#messages article.msg').length === 3`)
	if gps := eval[string](b, `[...document.querySelectorAll('#messages article')].map((a) => a.dataset.gp).join()`); gps != "1,2,3" {
		t.Fatalf("the category view lists global positions %s, want 1,2,3", gps)
	}
	b.screenshot("stream")

	// Paging through a long stream.
	appendAs(t, c.Nodes[1].Addr, shopToken, "bulk-1", "Counted", `{"n": 1}`, 25)
	b.hash("#/streams/stream/bulk-1")
	b.wait("the first page", `document.querySelectorAll('#messages article.msg').length === 20 && document.querySelector("#page-next") !== null`)
	b.do("next page", chromedp.Click(chromedp.ID("page-next")))
	b.wait("the second page", `document.querySelectorAll('#messages article.msg').length === 5 && document.querySelector('#messages article.msg .pos').textContent === "#20" && document.querySelector("#page-next") === null`)

	// Metrics from the node's /metrics.
	b.hash("#/metrics")
	b.wait("the metrics charts", `document.querySelectorAll("#metrics-charts svg").length === 3 && ["leader", "follower"].includes(document.querySelector("#metrics-state")?.textContent)`)

	// Transfer leadership from the cluster page; the page follows. Raft's
	// transfer can time out on a loaded machine (the page then says it
	// failed, as the API did): an operator tries again, and so does this.
	b.hash("#/cluster")
	var oldLeader string
	for attempt := 1; ; attempt++ {
		b.wait("the cluster page", `document.querySelector('#cluster-table tr[data-role="leader"] button.transfer') !== null && document.querySelector("#confirm") === null`)
		oldLeader = eval[string](b, `document.querySelector("#cluster-leader").dataset.id`)
		b.js("clear the last outcome", `document.querySelector("#cluster-message")?.replaceChildren()`)
		b.js("ask to transfer leadership", `document.querySelector('#cluster-table tr[data-role="leader"] button.transfer').click()`)
		b.do("confirm", chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
		b.wait("the transfer's outcome", `/^(Leadership transferred|Transferring leadership failed)/.test(document.querySelector("#cluster-message")?.textContent ?? "")`)
		outcome := eval[string](b, `document.querySelector("#cluster-message").textContent`)
		if strings.HasPrefix(outcome, "Leadership transferred") {
			break
		}
		if attempt == 3 {
			t.Fatalf("the transfer failed %d times, the last: %s", attempt, outcome)
		}
		t.Logf("transfer attempt %d: %s; trying again", attempt, outcome)
	}
	b.wait("the new leader on the page", fmt.Sprintf(`document.querySelector("#cluster-message")?.textContent.startsWith("Leadership transferred") && document.querySelector("#cluster-leader").dataset.id !== %q && document.querySelector('#cluster-table tr[data-role="leader"]')?.dataset.id === document.querySelector("#cluster-leader").dataset.id`, oldLeader))
	newLeader := eval[string](b, `document.querySelector("#cluster-leader").dataset.id`)
	if l := c.Leader(); l.ID() != newLeader {
		t.Fatalf("the page shows leader %s, the cluster has %s", newLeader, l.ID())
	}

	// The node the console came from goes away (the leader or not): it
	// shows as down, and the console keeps working through another.
	n0ID := n0.ID()
	c.Kill(n0)
	b.wait("the node down and another in use", fmt.Sprintf(`document.querySelector('#cluster-table tr[data-id=%q]')?.classList.contains("down") && document.querySelector("#node-current").textContent !== %q`, n0ID, n0.Addr))
	// A down node is offered removal, not leadership.
	b.wait("no Make leader on the down node", fmt.Sprintf(`(() => { const tr = document.querySelector('#cluster-table tr[data-id=%q]'); return tr?.classList.contains("down") && tr.querySelector("button.transfer") === null && tr.querySelector("button.remove") !== null })()`, n0ID))
	b.wait("a leadership transfer on each live node", `document.querySelectorAll('#cluster-table tr:not(.down) button.transfer').length === 2`)
	b.hash("#/streams/stream/order-1")
	b.wait("the stream read through another node", `document.querySelectorAll('#messages article.msg').length === 2`)

	// Remove the dead node from the cluster.
	b.hash("#/cluster")
	b.wait("the cluster page", fmt.Sprintf(`document.querySelector('#cluster-table tr[data-id=%q] button.remove') !== null`, n0ID))
	b.js("ask to remove the dead node", fmt.Sprintf(`document.querySelector('#cluster-table tr[data-id=%q] button.remove').click()`, n0ID))
	b.do("confirm", chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait("the node removed", `document.querySelectorAll("#cluster-table tbody tr").length === 2 && document.querySelector("#cluster-message").textContent.startsWith("Removed")`)

	// A namespace token sees its namespace only.
	b.do("sign out", chromedp.Click(chromedp.ID("signout")))
	b.signIn(shopToken)
	b.wait("signed in to shop", `document.querySelector("#nav-streams") !== null && document.querySelector("#nav-cluster") === null && document.querySelector("#acting")?.textContent === "shop"`)
	b.hash("#/tail/all")
	b.wait("the namespace's tail", `document.querySelector("#tail-caught-up") !== null && document.querySelectorAll('#tail-messages article').length === 28`)

	// The admin, in a new session, works in shop without its token: each
	// call names shop (the Skald-Namespace header).
	b.do("sign out", chromedp.Click(chromedp.ID("signout")))
	b.signIn(testcluster.AdminToken)
	b.wait("signed in as the admin", `document.querySelector("#nav-cluster") !== null && location.hash === "#/cluster" && document.querySelector("#acting")?.textContent === "default"`)
	b.hash("#/namespaces")
	b.wait("the namespaces page", `document.querySelector('#ns-table button.work[data-ns="shop"]') !== null`)
	b.js("work in shop", `document.querySelector('#ns-table button.work[data-ns="shop"]').click()`)
	b.wait("shop's streams", `document.querySelector("#acting")?.textContent === "shop" && document.querySelectorAll("#categories-table tbody tr").length === 2`)
	if eval[bool](b, `document.querySelector("#prompt-input") !== null || document.querySelector("dialog") !== null`) {
		t.Fatal("working in shop asked for something")
	}

	live := c.Nodes[1].Addr // n0 is gone
	tagsDCBAndQuery(t, b)
	groups(t, b, live, shopToken)
	retention(t, b)
	hardDeleted(t, b, live, shopToken)
	indexes(t, b, live, shopToken)
	credentials(t, b, live)
}

// tagsDCBAndQuery appends with tags and a message id (a retry is a
// duplicate), with a DCB condition that fails, and finds the message on
// the Query page with its tags.
func tagsDCBAndQuery(t *testing.T, b *browser) {
	t.Helper()
	const id = "0b5e5c1e-7d2a-4f3b-9c1d-2e4f6a8b0c11"
	b.hash("#/append/enrol-1")
	b.do("append with tags and an id", chromedp.WaitVisible(chromedp.ID("append-form")), chromedp.SetValue(chromedp.ID("append-type"), "Enrolled"),
		chromedp.SetValue(chromedp.ID("append-tags"), "course:c1, student:s7"), chromedp.SetValue(chromedp.ID("append-id"), id),
		chromedp.SetValue(chromedp.ID("append-data"), `{"course": "c1", "student": "s7"}`), chromedp.Click(chromedp.ID("append-button")))
	b.wait("appended", `document.querySelector("#append-ok")?.textContent.startsWith("Appended at position 0")`)
	b.do("the same id again", chromedp.Evaluate[chromedp.Void](`document.querySelector("#append-expected").value = ""`), chromedp.Click(chromedp.ID("append-button")))
	b.wait("a duplicate, nothing new", `document.querySelector("#append-ok")?.textContent.startsWith("Already written (the same message id): nothing new, the original position 0")`)
	// A condition: fail if an Enrolled message tagged course:c1 exists.
	b.do("append with a condition", chromedp.Evaluate[chromedp.Void](`document.querySelector("#append-id").value = ""; document.querySelector("#append-expected").value = ""`),
		chromedp.Click(chromedp.ID("append-condition")), chromedp.WaitVisible(chromedp.ID("append-cond-types-0")),
		chromedp.SetValue(chromedp.ID("append-cond-types-0"), "Enrolled"), chromedp.SetValue(chromedp.ID("append-cond-tags-0"), "course:c1"),
		chromedp.Click(chromedp.ID("append-button")))
	b.wait("the condition failed", `document.querySelector("#append-error")?.textContent.startsWith("failed_precondition: ")`)
	if got := eval[string](b, `document.querySelector("#append-error").textContent`); strings.Count(got, "\n") != 0 || !strings.Contains(got, "global position") {
		t.Fatalf("the failed condition shown as %q: want the API's one line, naming the global position", got)
	}
	b.do("a condition on another course holds", chromedp.SetValue(chromedp.ID("append-cond-tags-0"), "course:c2"), chromedp.Click(chromedp.ID("append-button")))
	b.wait("appended under the condition", `document.querySelector("#append-ok")?.textContent.startsWith("Appended at position 1")`)

	// Query: course:c1 and Enrolled; tags shown on each message.
	b.hash("#/query")
	b.do("query", chromedp.WaitVisible(chromedp.ID("query-form")), chromedp.SetValue(chromedp.ID("query-types-0"), "Enrolled"),
		chromedp.SetValue(chromedp.ID("query-tags-0"), "student:s7"), chromedp.Click(chromedp.ID("query-run")))
	b.wait("the query's results", `document.querySelectorAll("#query-results article.msg").length === 2 && document.querySelector("#query-status").textContent.startsWith("2 matching messages")`)
	if tags := eval[string](b, `[...document.querySelectorAll("#query-results article.msg")[0].querySelectorAll(".tag")].map((e) => e.textContent).join()`); tags != "course:c1,student:s7" {
		t.Fatalf("the first result's tags shown as %q", tags)
	}
	b.screenshot("query")
	b.do("query after", chromedp.SetValue(chromedp.ID("query-after"), eval[string](b, `document.querySelector("#query-results article.msg").dataset.gp`)), chromedp.Click(chromedp.ID("query-run")))
	b.wait("only the later message", `document.querySelectorAll("#query-results article.msg").length === 1`)
	b.do("a query that matches nothing", chromedp.SetValue(chromedp.ID("query-after"), "0"), chromedp.SetValue(chromedp.ID("query-tags-0"), "student:nobody"), chromedp.Click(chromedp.ID("query-run")))
	b.wait("no match", `document.querySelector("#query-none") !== null && document.querySelectorAll("#query-results article.msg").length === 0`)
	// Tags in the stream view too.
	b.hash("#/streams/stream/enrol-1")
	b.wait("tags in the stream view", `document.querySelector("#messages article.msg .tags")?.textContent === "course:c1student:s7"`)
}

// groups creates a group in the console; a consumer attached through the
// API holds one message and parks two; the console shows the group's lag,
// in-flight and parked counts, edits its settings, and replays and
// deletes the parked messages.
func groups(t *testing.T, b *browser, addr, token string) {
	t.Helper()
	b.hash("#/groups")
	b.do("create a group", chromedp.WaitVisible(chromedp.ID("group-create")), chromedp.SetValue(chromedp.ID("group-name"), "shipping"),
		chromedp.SetValue(chromedp.ID("group-source"), "category"), chromedp.SetValue(chromedp.ID("group-target"), "order"), chromedp.Click(chromedp.ID("group-create-button")))
	b.wait("the group listed", `document.querySelector("#group-created") !== null && document.querySelector('#groups-table tr[data-group="shipping"]')?.textContent.includes("category order")`)

	// A consumer takes the three messages of category order: it parks two
	// and keeps one in flight.
	ctx, cancel := context.WithTimeout(context.Background(), 3*stepTimeout)
	defer cancel()
	subs := skaldv1connect.NewSubscriptionsClient(http.DefaultClient, "http://"+addr)
	auth := func(r connect.AnyRequest) { r.Header().Set("Authorization", "Bearer "+token) }
	creq := connect.NewRequest(&skaldv1.ConsumeRequest{Group: "shipping", Consumer: "console-test"})
	auth(creq)
	cctx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	stream, err := subs.Consume(cctx, creq)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	var ids []string
	for len(ids) < 3 && stream.Receive() {
		if d := stream.Msg().GetDelivery(); d != nil {
			ids = append(ids, d.Message.Id)
		}
	}
	if len(ids) < 3 {
		t.Fatalf("consumed %d messages, want 3: %v", len(ids), stream.Err())
	}
	nreq := connect.NewRequest(&skaldv1.NackRequest{Group: "shipping", Ids: ids[:2], Action: skaldv1.NackAction_NACK_ACTION_PARK, Reason: "no carrier"})
	auth(nreq)
	if _, err := subs.Nack(ctx, nreq); err != nil {
		t.Fatalf("park two: %v", err)
	}
	b.wait("the consumer, in flight and parked in the list", `(() => { const tr = document.querySelector('#groups-table tr[data-group="shipping"]'); return tr && tr.querySelector(".consumers").textContent === "1" && tr.querySelector(".in-flight").textContent === "1" && tr.querySelector(".parked").textContent === "2" })()`)
	b.screenshot("groups")

	b.js("open the group", `document.querySelector('#groups-table tr[data-group="shipping"] a').click()`)
	b.wait("the group's page", `document.querySelector("#group-consumers")?.textContent === "1 attached" && document.querySelector("#group-in-flight").textContent === "1" && document.querySelectorAll("#parked-table tbody tr").length === 2 && document.querySelector("#parked-table td.reason").textContent === "no carrier"`)
	// Settings: a value out of range is refused with the API's word, once.
	b.do("an invalid setting", chromedp.WaitVisible(chromedp.ID("setting-maxRetries")), chromedp.SetValue(chromedp.ID("setting-maxInFlight"), "0"), chromedp.Click(chromedp.ID("settings-save")))
	b.wait("the setting refused", `document.querySelector("#settings-error")?.textContent.startsWith("invalid_argument: settings.max_in_flight")`)
	if got := eval[string](b, `document.querySelector("#settings-error").textContent`); strings.Contains(got, "\n") {
		t.Fatalf("the refusal is shown as %q: more than once", got)
	}
	b.do("edit the settings", chromedp.SetValue(chromedp.ID("setting-maxInFlight"), "1000"), chromedp.SetValue(chromedp.ID("setting-maxRetries"), "3"),
		chromedp.SetValue(chromedp.ID("setting-ackTimeout"), "5000"), chromedp.Click(chromedp.ID("settings-save")))
	b.wait("the settings saved", `document.querySelector("#settings-saved") !== null && document.querySelector("#setting-maxRetries").value === "3"`)
	greq := connect.NewRequest(&skaldv1.GetGroupRequest{Name: "shipping"})
	auth(greq)
	g, err := subs.GetGroup(ctx, greq)
	if err != nil {
		t.Fatal(err)
	}
	if st := g.Msg.Group.Settings; st.GetMaxRetries() != 3 || st.GetAckTimeout().AsDuration() != 5*time.Second || st.GetMaxInFlight() != 1000 || st.GetMaxInFlightPerConsumer() != 100 {
		t.Fatalf("settings after the edit: %v; want max_retries 3, ack_timeout 5s, the rest as they were", st)
	}
	b.screenshot("group")

	// Replay the first parked message, delete the second.
	gps := eval[[]string](b, `[...document.querySelectorAll("#parked-table tbody tr")].map((tr) => tr.dataset.gp)`)
	b.js("replay one", fmt.Sprintf(`document.querySelector('#parked-table tr[data-gp=%q] button.replay').click()`, gps[0]))
	b.wait("replayed", `document.querySelector("#parked-done")?.textContent === "Replayed 1; 1 still parked." && document.querySelectorAll("#parked-table tbody tr").length === 1`)
	b.js("delete one", fmt.Sprintf(`document.querySelector('#parked-table tr[data-gp=%q] button.delete').click()`, gps[1]))
	b.do("confirm", chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait("deleted", `document.querySelector("#parked-done")?.textContent === "Deleted 1; 0 still parked." && document.querySelector("#parked-none") !== null`)
	stopConsumer()
}

// retention sets, lists and clears retention policies of shop.
func retention(t *testing.T, b *browser) {
	t.Helper()
	b.hash("#/retention")
	b.wait("shop's retention", `document.querySelector("#retention-ns")?.value === "shop" && document.querySelector("#retention-none") !== null`)
	b.do("an unreadable age", chromedp.SetValue(chromedp.ID("retention-age"), "7 days"), chromedp.Click(chromedp.ID("retention-set")))
	b.wait("refused in the browser", `document.querySelector("#retention-error")?.textContent.startsWith("max age: \"7 days\" is not a duration")`)
	b.do("the namespace keeps 30 days", chromedp.SetValue(chromedp.ID("retention-age"), "30d"), chromedp.Click(chromedp.ID("retention-set")))
	b.wait("set", `document.querySelector("#retention-done")?.textContent === "Set the policy of the namespace." && document.querySelector('#retention-table tr[data-scope="namespace"] .max-age')?.textContent === "30d"`)
	b.do("category order keeps 100 per stream", chromedp.SetValue(chromedp.ID("retention-scope"), "2"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#retention-scope").dispatchEvent(new Event("change"))`),
		chromedp.SetValue(chromedp.ID("retention-name"), "order"), chromedp.Evaluate[chromedp.Void](`document.querySelector("#retention-age").value = ""`), chromedp.SetValue(chromedp.ID("retention-count"), "100"),
		chromedp.Click(chromedp.ID("retention-set")))
	b.wait("two policies", `document.querySelectorAll("#retention-table tbody tr").length === 2 && document.querySelector('#retention-table tr[data-scope="category"][data-name="order"] .max-count')?.textContent === "100"`)
	b.screenshot("retention")
	b.js("clear the namespace's", `document.querySelector('#retention-table tr[data-scope="namespace"] button.clear').click()`)
	b.wait("cleared", `document.querySelector("#retention-done")?.textContent === "Cleared the policy of the namespace." && document.querySelectorAll("#retention-table tbody tr").length === 1`)
}

// hardDeleted: a hard-deleted stream's view says it is a tombstone, and
// offers no append; a soft-deleted one says its messages were deleted.
func hardDeleted(t *testing.T, b *browser, addr, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	events := skaldv1connect.NewEventStoreClient(http.DefaultClient, "http://"+addr)
	for _, tc := range []struct {
		stream string
		hard   bool
		shown  string
	}{
		{"gone-1", true, `document.querySelector("#stream-hard-deleted")?.textContent.startsWith("This stream was hard-deleted") && document.querySelector("#stream-append").hidden`},
		{"gone-2", false, `document.querySelector("#stream-emptied")?.textContent.includes("kept version 1") && !document.querySelector("#stream-append").hidden && document.querySelector("#stream-hard-deleted") === null`},
	} {
		appendAs(t, addr, token, tc.stream, "Temp", `{}`, 2)
		req := connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: tc.stream, Hard: tc.hard})
		req.Header().Set("Authorization", "Bearer "+token)
		if _, err := events.DeleteStream(ctx, req); err != nil {
			t.Fatalf("delete %s: %v", tc.stream, err)
		}
		b.hash("#/streams/stream/" + tc.stream)
		b.wait(tc.stream+" deleted", tc.shown)
	}
}

// indexes creates an index of shop on the Indexes page, appends the
// events it takes (one without the amount, skipped), waits for it to be
// healthy with its entries, queries it (equality, range, descending by
// pages, prefix, a value the server refuses) and deletes it.
func indexes(t *testing.T, b *browser, addr, token string) {
	t.Helper()
	b.hash("#/indexes")
	b.wait("no index yet", `document.querySelector("#indexes-none") !== null && document.querySelector("h2 code")?.textContent === "shop"`)
	b.do("create an index", chromedp.WaitVisible(chromedp.ID("index-create")),
		chromedp.SetValue(chromedp.ID("index-name"), "by-customer"), chromedp.SetValue(chromedp.ID("index-category"), "invoice"),
		chromedp.SetValue(chromedp.ID("index-field-pointer-0"), "/customer"),
		chromedp.Click(chromedp.ID("index-field-add")), chromedp.WaitVisible(chromedp.ID("index-field-pointer-1")),
		chromedp.SetValue(chromedp.ID("index-field-pointer-1"), "/amount"), chromedp.SetValue(chromedp.ID("index-field-type-1"), "2"),
		chromedp.Click(chromedp.ID("index-create-button")))
	b.wait("the index listed", `document.querySelector("#index-created") !== null && document.querySelector('#indexes-table tr[data-index="by-customer"]') !== null`)
	if got := eval[string](b, `[...document.querySelectorAll('#indexes-table tr[data-index="by-customer"] td')].slice(1, 4).map((td) => td.textContent).join(" | ")`); got != "category invoice | data /customer (string)data /amount (int) | event" {
		t.Fatalf("the index's definition shown as %q", got)
	}
	for i, data := range []string{`{"customer": "c1", "amount": 10}`, `{"customer": "c1", "amount": 30}`, `{"customer": "c2", "amount": 20}`, `{"customer": "c1"}`} {
		appendAs(t, addr, token, fmt.Sprintf("invoice-%d", i+1), "Issued", data)
	}
	// The list reports the answering node's progress: wait for it.
	b.wait("the index healthy with its entries", `(() => { const tr = document.querySelector('#indexes-table tr[data-index="by-customer"]'); return tr && tr.querySelector(".state").textContent === "healthy" && tr.querySelector(".entries").textContent === "3" && tr.querySelector(".skipped").textContent === "1" && tr.querySelector(".lag").textContent === "0 events" && tr.querySelector(".progress").textContent === "100%" })()`)
	b.screenshot("indexes")

	b.js("open the index", `document.querySelector('#indexes-table tr[data-index="by-customer"] a').click()`)
	b.wait("the index's page", `document.querySelector("#index-eq-1") !== null && document.querySelector("#index-entries")?.textContent === "3 (1 skipped)"`)
	hits := func(what string, n int) string {
		t.Helper()
		b.wait(what, fmt.Sprintf(`document.querySelectorAll("#index-hits article.hit").length === %d && document.querySelector("#index-query-status").textContent !== "Reading…"`, n))
		return eval[string](b, `[...document.querySelectorAll("#index-hits article.hit")].map((a) => a.querySelector("a.stream").textContent + "=" + [...a.querySelectorAll(".hit-values .tag")].map((e) => e.textContent).join("/")).join(" ")`)
	}
	b.do("equal and a range", chromedp.SetValue(chromedp.ID("index-eq-0"), "c1"), chromedp.SetValue(chromedp.ID("index-from"), "15"), chromedp.Click(chromedp.ID("index-run")))
	if got := hits("c1 from 15", 1); got != "invoice-2=c1/30" {
		t.Fatalf("customer c1 from amount 15: %q", got)
	}
	b.do("descending, a page of one", chromedp.Evaluate[chromedp.Void](`document.querySelector("#index-from").value = ""`), chromedp.Click(chromedp.ID("index-descending")),
		chromedp.SetValue(chromedp.ID("index-limit"), "1"), chromedp.Click(chromedp.ID("index-run")))
	if got := hits("the first page", 1); got != "invoice-2=c1/30" {
		t.Fatalf("c1 descending, first page: %q", got)
	}
	b.do("the next page", chromedp.Click(chromedp.ID("index-more")))
	if got := hits("the second page", 2); got != "invoice-2=c1/30 invoice-1=c1/10" {
		t.Fatalf("c1 descending, two pages: %q", got)
	}
	b.do("a prefix, ascending", chromedp.Evaluate[chromedp.Void](`document.querySelector("#index-eq-0").value = ""`), chromedp.SetValue(chromedp.ID("index-prefix"), "c"),
		chromedp.Click(chromedp.ID("index-descending")), chromedp.SetValue(chromedp.ID("index-limit"), "50"), chromedp.Click(chromedp.ID("index-run")))
	if got := hits("prefix c", 3); got != "invoice-1=c1/10 invoice-2=c1/30 invoice-3=c2/20" {
		t.Fatalf("prefix c: %q", got)
	}
	b.wait("no next page", `document.querySelector("#index-more").hidden && document.querySelector("#index-query-count").textContent === "3 hits"`)
	b.screenshot("index")
	// A value not of the field's type: the server's refusal, shown once.
	b.do("an amount that is not an int", chromedp.Evaluate[chromedp.Void](`document.querySelector("#index-prefix").value = ""`), chromedp.SetValue(chromedp.ID("index-eq-0"), "c1"),
		chromedp.SetValue(chromedp.ID("index-from"), "ten"), chromedp.Click(chromedp.ID("index-run")))
	b.wait("the value refused", `document.querySelector("#index-query-error")?.textContent.startsWith("invalid_argument: ")`)
	if got := eval[string](b, `document.querySelector("#index-query-error").textContent`); strings.Contains(got, "\n") || !strings.Contains(got, "ten") {
		t.Fatalf("the refusal shown as %q: want the API's one line, naming the value", got)
	}

	b.hash("#/indexes")
	b.wait("the list", `document.querySelector('#indexes-table button.delete[data-index="by-customer"]') !== null`)
	b.js("ask to delete the index", `document.querySelector('#indexes-table button.delete[data-index="by-customer"]').click()`)
	b.do("confirm", chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait("the index deleted", `document.querySelector("#indexes-done")?.textContent === "Deleted index by-customer." && document.querySelector("#indexes-none") !== null`)
}

// credentials manages shop's credentials as the admin (without shop's
// token): creates a reader (its token shown once), a scoped writer that
// expires, revokes it; a taken name is refused once; in default the
// admin credentials show. Then the reader signs in: a write is refused
// with the server's message, and so is the Credentials page.
func credentials(t *testing.T, b *browser, addr string) {
	t.Helper()
	b.hash("#/credentials")
	b.wait("shop's credentials", `document.querySelector("h2 code")?.textContent === "shop" && document.querySelector('#cred-table tr[data-name="initial"] .role')?.textContent === "owner"`)
	b.do("create a reader", chromedp.SetValue(chromedp.ID("cred-name"), "reporting"), chromedp.SetValue(chromedp.ID("cred-role"), "1"), chromedp.Click(chromedp.ID("cred-create")))
	b.wait("the token shown once", `document.querySelector("#cred-token")?.textContent.startsWith("ns_c2hvcA_") && document.querySelector("#cred-created").textContent.includes("shown only now") && document.querySelector("#cred-token-copy") !== null`)
	reader := eval[string](b, `document.querySelector("#cred-token").textContent`)
	b.wait("the reader listed", `document.querySelector('#cred-table tr[data-name="reporting"] .role')?.textContent === "reader" && document.querySelector('#cred-table tr[data-name="reporting"] .scope').textContent === "whole namespace"`)
	b.screenshot("credentials")
	b.do("an unreadable expiry", chromedp.SetValue(chromedp.ID("cred-name"), "billing"), chromedp.SetValue(chromedp.ID("cred-expires"), "soon"), chromedp.Click(chromedp.ID("cred-create")))
	b.wait("refused in the browser", `document.querySelector("#cred-error")?.textContent.startsWith("expires: \"soon\" is not a duration")`)
	b.do("a scoped writer that expires", chromedp.SetValue(chromedp.ID("cred-role"), "2"), chromedp.SetValue(chromedp.ID("cred-scope"), "invoice, order-eu-*"),
		chromedp.SetValue(chromedp.ID("cred-expires"), "30d"), chromedp.Click(chromedp.ID("cred-create")))
	b.wait("the writer listed", `(() => { const tr = document.querySelector('#cred-table tr[data-name="billing"]'); return tr && tr.querySelector(".role").textContent === "writer" && [...tr.querySelectorAll(".scope .tag")].map((e) => e.textContent).join() === "invoice,order-eu-*" && tr.children[3].textContent.startsWith(String(new Date(Date.now() + 30 * 86400000).getUTCFullYear())) })()`)
	b.do("a taken name", chromedp.SetValue(chromedp.ID("cred-name"), "billing"), chromedp.Click(chromedp.ID("cred-create")))
	b.wait("refused by the server", `document.querySelector("#cred-error")?.textContent.startsWith("already_exists: ")`)
	if got := eval[string](b, `document.querySelector("#cred-error").textContent`); strings.Contains(got, "\n") || !strings.Contains(got, "billing") {
		t.Fatalf("the refusal shown as %q: want the API's one line, naming the credential", got)
	}
	b.js("ask to revoke billing", `document.querySelector('#cred-table button.revoke[data-name="billing"]').click()`)
	b.do("confirm", chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait("billing revoked", `document.querySelector("#cred-done")?.textContent.startsWith("Revoked billing") && document.querySelector('#cred-table tr[data-name="billing"]') === null && document.querySelector('#cred-table tr[data-name="reporting"]') !== null`)

	// In default, the admin namespace: the cluster's admin credentials.
	b.hash("#/namespaces")
	b.wait("the namespaces page", `document.querySelector('#ns-table button.work[data-ns="default"]') !== null`)
	b.js("work in default", `document.querySelector('#ns-table button.work[data-ns="default"]').click()`)
	b.wait("acting in default", `document.querySelector("#acting")?.textContent === "default"`)
	b.hash("#/credentials")
	b.wait("the admin credentials", `document.querySelector("h2 code")?.textContent === "default" && document.querySelector('#cred-table tr[data-name="initial"] .role')?.textContent === "admin" && [...document.querySelectorAll("#cred-role option")].map((o) => o.textContent).join() === "reader,writer,owner,admin"`)

	// The reader: reads, but a write and the credentials are refused with
	// the server's message, once.
	b.do("sign out", chromedp.Click(chromedp.ID("signout")))
	b.signIn(reader)
	b.wait("signed in as the reader", `document.querySelector("#acting")?.textContent === "shop" && document.querySelector("#nav-cluster") === null`)
	b.hash("#/streams/stream/order-1")
	b.wait("the reader reads", `document.querySelectorAll('#messages article.msg').length === 2`)
	b.hash("#/append/order-9")
	b.do("append as the reader", chromedp.WaitVisible(chromedp.ID("append-form")), chromedp.SetValue(chromedp.ID("append-type"), "Placed"),
		chromedp.SetValue(chromedp.ID("append-data"), `{}`), chromedp.Click(chromedp.ID("append-button")))
	b.wait("the write refused", `document.querySelector("#append-error")?.textContent.startsWith("permission_denied: ")`)
	if got := eval[string](b, `document.querySelector("#append-error").textContent`); strings.Contains(got, "\n") || !strings.Contains(got, `"reporting"`) || !strings.Contains(got, "reader") {
		t.Fatalf("the refused write shown as %q: want the API's one line, naming the credential and its role", got)
	}
	b.hash("#/credentials")
	b.wait("the credentials refused", `document.querySelector("#cred-list-error")?.textContent.startsWith("permission_denied: ")`)
	// The refused append wrote nothing.
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	req := connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "order-9"})
	req.Header().Set("Authorization", "Bearer "+reader)
	r, err := skaldv1connect.NewEventStoreClient(http.DefaultClient, "http://"+addr).ReadStream(ctx, req)
	if err != nil {
		t.Fatalf("read order-9 as the reader: %v", err)
	}
	if n := len(r.Msg.Messages); n != 0 {
		t.Fatalf("the refused append wrote %d messages", n)
	}
}
