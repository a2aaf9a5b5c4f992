package fsm

import (
	"bytes"
	"crypto/md5"
	"math"
	"math/big"
	"testing"
)

func TestCategoryAndCardinalID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		stream, category, cardinal string
	}{
		{"account-123", "account", "123"},
		{"account-123+retry", "account", "123"},
		{"account", "account", ""},
		{"account-", "account", ""},
		{"account-a-b", "account", "a-b"},
		{"account-+x", "account", ""},
		{"a:command-1", "a:command", "1"},
		{"-x", "", "x"},
	}
	for _, c := range cases {
		if got := Category(c.stream); got != c.category {
			t.Errorf("Category(%q) = %q, want %q", c.stream, got, c.category)
		}
		if got := CardinalID(c.stream); got != c.cardinal {
			t.Errorf("CardinalID(%q) = %q, want %q", c.stream, got, c.cardinal)
		}
	}
}

// referenceMember computes Message DB's rule with big integers, straight
// from its definition: abs(int64(bigEndian(md5(id)[0:8]))) % size.
func referenceMember(id string, size int64) int64 {
	sum := md5.Sum([]byte(id))
	h := new(big.Int).SetBytes(sum[:8])
	if sum[0]&0x80 != 0 { // two's complement sign
		h.Sub(h, new(big.Int).Lsh(big.NewInt(1), 64))
	}
	h.Abs(h)
	return h.Mod(h, big.NewInt(size)).Int64()
}

func TestConsumerGroupMemberMatchesMD5Rule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		stream string
		size   int64
		want   int64 // precomputed from md5 below where fixed; -1 for no member
	}{
		{"account", 4, -1},
		{"account-", 4, -1},
	}
	for _, c := range cases {
		if got := ConsumerGroupMember(c.stream, c.size); got != c.want {
			t.Errorf("ConsumerGroupMember(%q, %d) = %d, want %d", c.stream, c.size, got, c.want)
		}
	}
	// md5("123") = 202cb962ac59075b...; 0x202cb962ac59075b = 2318431741638412123
	// is positive, and 2318431741638412123 % 4 = 3, % 3 = 1.
	for _, c := range []struct {
		size, want int64
	}{{4, 3}, {3, 1}, {1, 0}} {
		if got := ConsumerGroupMember("account-123", c.size); got != c.want {
			t.Errorf("ConsumerGroupMember(account-123, %d) = %d, want %d", c.size, got, c.want)
		}
	}
	for i := 0; i < 2000; i++ {
		id := string(rune('a'+i%26)) + string(rune('0'+i%10)) + big.NewInt(int64(i*7919)).String()
		for _, size := range []int64{1, 2, 3, 4, 7, 1000} {
			want := referenceMember(id, size)
			for _, stream := range []string{"c-" + id, "c-" + id + "+retry", "other-" + id} {
				if got := ConsumerGroupMember(stream, size); got != want {
					t.Fatalf("ConsumerGroupMember(%q, %d) = %d, want %d", stream, size, got, want)
				}
			}
		}
	}
}

func TestGroupMemberMinInt64(t *testing.T) {
	t.Parallel()
	// abs(math.MinInt64) = 2^63; 2^63 % 3 = 2, % 4 = 0.
	h := uint64(1) << 63
	if int64(h) != math.MinInt64 {
		t.Fatal("setup")
	}
	if got := groupMember(h, 3); got != 2 {
		t.Errorf("groupMember(MinInt64, 3) = %d, want 2", got)
	}
	if got := groupMember(h, 4); got != 0 {
		t.Errorf("groupMember(MinInt64, 4) = %d, want 0", got)
	}
}

func TestKeyOrder(t *testing.T) {
	t.Parallel()
	// One stream's keys never interleave with another's that shares a prefix,
	// and positions sort numerically.
	ordered := [][]byte{
		streamKey("a", 0), streamKey("a", 1), streamKey("a", 255), streamKey("a", 256), streamKey("a", math.MaxInt64),
		streamKey("a-1", 0), streamKey("ab", 0),
	}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1], ordered[i]) >= 0 {
			t.Errorf("key %d %x !< key %d %x", i-1, ordered[i-1], i, ordered[i])
		}
	}
	p := streamPrefix("a")
	end := prefixEnd(p)
	for _, k := range [][]byte{streamKey("a-1", 0), streamKey("ab", 0)} {
		if bytes.Compare(k, end) < 0 && bytes.HasPrefix(k, p) {
			t.Errorf("key %x falls inside stream a's range", k)
		}
	}
	if got := prefixEnd([]byte{'a', 0xff}); !bytes.Equal(got, []byte{'b'}) {
		t.Errorf("prefixEnd(a\\xff) = %x", got)
	}
}

func TestValueEncodings(t *testing.T) {
	t.Parallel()
	ce := catEntry{hasCardinal: true, hash: 0xdeadbeefcafebabe, stream: "account-1+x", correlation: "workflow"}
	flags, hash, stream, corr, err := decodeCatEntry(ce.encode())
	if err != nil || flags != 1 || hash != ce.hash || string(stream) != ce.stream || string(corr) != ce.correlation {
		t.Fatalf("catEntry round trip: %d %x %q %q %v", flags, hash, stream, corr, err)
	}
	if _, _, _, _, err := decodeCatEntry(ce.encode()[:12]); err == nil {
		t.Fatal("truncated catEntry decoded")
	}
	sm := streamMeta{lastPos: 7, lastGP: 99, lastTime: testTime, count: 8}
	if got, err := decodeStreamMeta(sm.encode()); err != nil || got != sm {
		t.Fatalf("streamMeta round trip: %+v %v", got, err)
	}
	nc := nsCounts{messages: 5, streams: 2, lastActivity: testTime}
	if got, err := decodeNSCounts(nc.encode()); err != nil || got != nc {
		t.Fatalf("nsCounts round trip: %+v %v", got, err)
	}
}

func TestCorrelationCategory(t *testing.T) {
	t.Parallel()
	cases := []struct{ meta, want string }{
		{``, ""},
		{`{}`, ""},
		{`{"correlationStreamName":"workflow-123"}`, "workflow"},
		{`{"correlationStreamName":"workflow"}`, "workflow"},
		{`{"correlationStreamName":7}`, ""},
		{`{"CorrelationStreamName":"workflow-1"}`, ""},
		{`{"x":{"correlationStreamName":"workflow-1"}}`, ""},
	}
	for _, c := range cases {
		if got := correlationCategory([]byte(c.meta)); got != c.want {
			t.Errorf("correlationCategory(%s) = %q, want %q", c.meta, got, c.want)
		}
	}
}
