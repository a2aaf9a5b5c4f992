package delivery

import (
	"fmt"
	"slices"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// A group over one stream reads the stream from where its last read
// stopped, not from position 0 with the cursor as a floor: a refresh of
// a group far into a long stream examines none of the messages below its
// cursor (a scan budget of 1 would stop such a read), and still returns
// exactly the stream's messages in order, page after page.
func TestReadSourceStreamResumesAtPosition(t *testing.T) {
	h := newTestHost(t)
	h.createNamespace("app")
	var want []int64
	for i := range 120 {
		stream := fmt.Sprintf("job-%d", i%3)
		gp := h.appendOne("app", stream)
		if stream == "job-1" {
			want = append(want, gp)
		}
	}
	src := &fsmv1.GroupSource{Stream: "job-1"}
	var got []int64
	cursor, streamPos := int64(1), int64(0)
	for calls := 0; ; calls++ {
		if calls > 50 {
			t.Fatalf("no end after %d reads (cursor %d)", calls, cursor)
		}
		v, err := h.View("app")
		if err != nil {
			t.Fatal(err)
		}
		v.SetScanBudget(1)
		msgs, next, pos, err := readSource(v, src, cursor, streamPos, 7)
		_, stopped := v.ScanStopped()
		v.Close()
		if err != nil {
			t.Fatal(err)
		}
		if stopped {
			t.Fatalf("read %d from cursor %d, stream position %d examined a message below the cursor", calls, cursor, streamPos)
		}
		for _, m := range msgs {
			got = append(got, m.GlobalPosition)
		}
		if len(msgs) == 0 {
			break
		}
		cursor, streamPos = next, pos
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
