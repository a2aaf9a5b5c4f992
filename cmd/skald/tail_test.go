package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/testutil"
)

// tailProc is a running skald tail.
type tailProc struct {
	cmd         *exec.Cmd
	out, errOut *syncBuffer
	done        chan error
}

// startTail runs skald tail with args until the test ends and waits until
// it has caught up.
func startTail(t *testing.T, env []string, args ...string) *tailProc {
	t.Helper()
	tp := &tailProc{out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	tp.cmd = exec.Command(binary, append([]string{"tail"}, args...)...)
	tp.cmd.Env = append(os.Environ(), env...)
	tp.cmd.Stdout, tp.cmd.Stderr = tp.out, tp.errOut
	if err := tp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { tp.done <- tp.cmd.Wait() }()
	t.Cleanup(func() {
		tp.cmd.Process.Kill()
		<-tp.done
	})
	testutil.Until(t, 20*time.Second, "tail to catch up", func() (bool, string) {
		return strings.Contains(tp.errOut.String(), "caught up"), tp.errOut.String()
	})
	return tp
}

// TestTailFollowsFromTheEnd: skald tail prints only what is appended after
// it started, unless --from-start or --position N asks for history; a
// negative position is refused.
func TestTailFollowsFromTheEnd(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	appendMsg := func(stream, typ string) {
		t.Helper()
		if _, errOut, code := runCLI(t, env, "append", stream, typ, `{}`); code != 0 {
			t.Fatalf("append: %s", errOut)
		}
	}
	for _, typ := range []string{"Old0", "Old1", "Old2"} {
		appendMsg("acct-1", typ)
	}
	appendMsg("other-1", "Old3") // global position 4
	cases := []struct {
		name string
		args []string
		want string // the lines printed, in order: stream position type
	}{
		{"stream from the end", []string{"acct-1"}, "acct-1 3 New"},
		{"stream from the start", []string{"acct-1", "--from-start"}, "acct-1 0 Old0\nacct-1 1 Old1\nacct-1 2 Old2\nacct-1 3 New"},
		{"stream from a position", []string{"acct-1", "--position", "2"}, "acct-1 2 Old2\nacct-1 3 New"},
		{"category from the end", []string{"--category", "acct"}, "acct-1 3 New"},
		{"category from a global position", []string{"--category", "acct", "--position", "3"}, "acct-1 2 Old2\nacct-1 3 New"},
		{"all from the end", []string{"--all"}, "acct-1 3 New"},
		{"all from the start", []string{"--all", "--from-start"}, "acct-1 0 Old0\nacct-1 1 Old1\nacct-1 2 Old2\nother-1 0 Old3\nacct-1 3 New"},
	}
	var tails []*tailProc
	for _, c := range cases {
		tails = append(tails, startTail(t, env, c.args...))
	}
	appendMsg("acct-1", "New")
	line := regexp.MustCompile(`(?m)^(\S+)\t(\d+)\t\d+\t(\S+)\t`)
	for i, c := range cases {
		tp := tails[i]
		testutil.Until(t, 20*time.Second, c.name+": the new message", func() (bool, string) {
			return strings.Contains(tp.out.String(), "\tNew\t"), tp.out.String() + tp.errOut.String()
		})
		var got []string
		for _, m := range line.FindAllStringSubmatch(tp.out.String(), -1) {
			got = append(got, m[1]+" "+m[2]+" "+m[3])
		}
		if strings.Join(got, "\n") != c.want {
			t.Errorf("%s: skald tail %q printed\n%s\nwant\n%s", c.name, c.args, strings.Join(got, "\n"), c.want)
		}
	}
	for _, args := range [][]string{
		{"acct-1", "--position", "-1"},
		{"--all", "--position", "-1"},
		{"acct-1", "--from-start", "--position", "2"},
	} {
		if _, errOut, code := runCLI(t, env, append([]string{"tail"}, args...)...); code != command.ExitUsage || !strings.Contains(errOut, "--position") {
			t.Errorf("skald tail %q: exit %d, %q; want a usage error naming --position", args, code, errOut)
		}
	}
}

// TestTailScopedCategory: skald tail --category C with a credential scoped
// to C starts at the category's end, which it may read, and prints what
// is appended to C after it started.
func TestTailScopedCategory(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	out, _, code := runCLI(t, admin, "ns", "create", "shop", "-o", "json")
	var created struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
		t.Fatalf("ns create: exit %d %q", code, out)
	}
	owner := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + created.Token}
	out, errOut, code := runCLI(t, owner, "token", "create", "audit", "--role", "reader", "--scope", "acct", "-o", "json")
	var made struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &made) != nil {
		t.Fatalf("token create: exit %d %q %q", code, out, errOut)
	}
	appendMsg := func(stream, typ string) {
		t.Helper()
		if _, errOut, code := runCLI(t, owner, "append", stream, typ, `{}`); code != 0 {
			t.Fatalf("append: %s", errOut)
		}
	}
	appendMsg("acct-1", "Old0")
	appendMsg("other-1", "Old1") // the namespace's last message is outside the scope
	tp := startTail(t, []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + made.Token}, "--category", "acct")
	appendMsg("other-1", "Other")
	appendMsg("acct-1", "New")
	testutil.Until(t, 20*time.Second, "the new message", func() (bool, string) {
		return strings.Contains(tp.out.String(), "\tNew\t"), tp.out.String() + tp.errOut.String()
	})
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^(\S+)\t(\d+)\t\d+\t(\S+)\t`).FindAllStringSubmatch(tp.out.String(), -1) {
		got = append(got, m[1]+" "+m[2]+" "+m[3])
	}
	if want := "acct-1 1 New"; strings.Join(got, "\n") != want {
		t.Errorf("skald tail --category acct printed\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}
