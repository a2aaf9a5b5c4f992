package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	"github.com/skalddb/skald/internal/buildinfo"
	"github.com/skalddb/skald/internal/testcluster"
	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
	"github.com/skalddb/skald/rpc/gen/skald/v1/skaldv1connect"
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

func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	c := testcluster.Start(t, 3)
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
	b.screenshot("cluster")

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
	b.hash("#/streams")
	b.do("work in shop", chromedp.WaitVisible(chromedp.ID("acting-select")), chromedp.SetValue(chromedp.ID("acting-select"), "shop"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#acting-select").dispatchEvent(new Event("change"))`))
	b.wait("acting in shop", `document.querySelector("#acting-select")?.value === "shop" && document.querySelector("h2 code")?.textContent === "shop"`)

	// Append with an expected version, then a conflict shown as the API says it.
	b.hash("#/append/order-1")
	b.do("append", chromedp.WaitVisible(chromedp.ID("append-form")), chromedp.SetValue(chromedp.ID("append-type"), "Placed"),
		chromedp.SetValue(chromedp.ID("append-data"), `{"total": 42, "items": ["tea"]}`), chromedp.SetValue(chromedp.ID("append-metadata"), `{"by": "console-test"}`),
		chromedp.SetValue(chromedp.ID("append-expected"), "-1"), chromedp.Click(chromedp.ID("append-button")), chromedp.WaitVisible(chromedp.ID("append-ok")))
	b.do("append with a stale expected version", chromedp.SetValue(chromedp.ID("append-expected"), "5"), chromedp.Click(chromedp.ID("append-button")),
		chromedp.WaitVisible(chromedp.ID("append-error")))
	if got := eval[string](b, `document.querySelector("#append-error").textContent`); !strings.Contains(got, "aborted: ") || !strings.Contains(got, "expected version 5, actual version 0") {
		t.Fatalf("conflict shown as %q", got)
	}

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

	b.hash("#/streams")
	b.wait("the category listed", `document.querySelector("#categories-table tbody tr")?.textContent === "order23"`)
	b.do("search streams", chromedp.SendKeys(chromedp.ID("stream-search"), "order-2"))
	b.wait("the search result", `document.querySelectorAll("#streams-table tbody tr").length === 1 && document.querySelector("#streams-table tbody tr td").textContent === "order-2"`)
	b.hash("#/streams/category/order")
	b.wait("the category view", `document.querySelectorAll('#messages article.msg').length === 3`)
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

	// Transfer leadership from the cluster page; the page follows.
	b.hash("#/cluster")
	b.wait("the cluster page", `document.querySelector('#cluster-table tr[data-role="leader"] button.transfer') !== null`)
	oldLeader := eval[string](b, `document.querySelector("#cluster-leader").dataset.id`)
	b.js("ask to transfer leadership", `document.querySelector('#cluster-table tr[data-role="leader"] button.transfer').click()`)
	b.do("confirm", chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
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

	// The admin, in a new session, works in shop with its token pasted: a
	// token of another namespace is refused first.
	b.do("sign out", chromedp.Click(chromedp.ID("signout")))
	b.signIn(testcluster.AdminToken)
	b.wait("signed in as the admin", `document.querySelector("#nav-cluster") !== null && location.hash === "#/cluster"`)
	b.hash("#/namespaces")
	b.wait("the namespaces page", `document.querySelector('#ns-table button.work[data-ns="shop"]') !== null`)
	b.js("work in shop", `document.querySelector('#ns-table button.work[data-ns="shop"]').click()`)
	b.do("paste a wrong token", chromedp.WaitVisible(chromedp.ID("prompt-input")), chromedp.SetValue(chromedp.ID("prompt-input"), testcluster.AdminToken), chromedp.Click(chromedp.ID("prompt-ok")))
	b.wait("the wrong token refused", `document.querySelector("#ns-message").textContent === "That is not a token of shop."`)
	b.js("work in shop", `document.querySelector('#ns-table button.work[data-ns="shop"]').click()`)
	b.do("paste shop's token", chromedp.WaitVisible(chromedp.ID("prompt-input")), chromedp.SetValue(chromedp.ID("prompt-input"), shopToken), chromedp.Click(chromedp.ID("prompt-ok")))
	b.wait("shop's streams", `document.querySelector("#acting-select")?.value === "shop" && document.querySelectorAll("#categories-table tbody tr").length === 2`)
}
