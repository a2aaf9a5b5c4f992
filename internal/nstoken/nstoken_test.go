package nstoken

import (
	"bytes"
	"strings"
	"testing"
)

func TestNewParsesBack(t *testing.T) {
	for _, name := range []string{"default", "app", "ünïcode-ns", "a_b-c"} {
		tok, err := New(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(tok)
		if err != nil || got != name {
			t.Fatalf("Parse(New(%q)) = %q, %v", name, got, err)
		}
		again, _ := New(name)
		if again == tok {
			t.Fatalf("two tokens for %q are equal: the secret is not random", name)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	cases := []struct{ token, want string }{
		{"", `token must start with "ns_"`},
		{"xx_YXBw_" + hex64, `token must start with "ns_"`},
		{"ns_YXBw", "token must be ns_<namespace>_<secret>"},
		{"ns_YXBw_" + hex64 + "_x", "token must be ns_<namespace>_<secret>"},
		{"ns_YXBw_abc", "token secret must be 64 hex characters, got 3"},
		{"ns_YXBw_" + strings.Repeat("zz", 32), "token secret must be hex"},
		{"ns__" + hex64, "token namespace must be non-empty unpadded base64url"},
		{"ns_YXBw=_" + hex64, "token namespace must be non-empty unpadded base64url"},
	}
	for _, tc := range cases {
		if _, err := Parse(tc.token); err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) = %v, want %q", tc.token, err, tc.want)
		}
	}
}

func TestHashIsSHA256OfTheToken(t *testing.T) {
	a, b := Hash("ns_YXBw_x"), Hash("ns_YXBw_y")
	if len(a) != 32 || bytes.Equal(a, b) || !bytes.Equal(a, Hash("ns_YXBw_x")) {
		t.Fatalf("Hash: %x %x", a, b)
	}
}

func TestCredentialTokens(t *testing.T) {
	tok, id, err := NewCredential("app")
	if err != nil {
		t.Fatal(err)
	}
	if name, err := Parse(tok); err != nil || name != "app" {
		t.Fatalf("Parse(NewCredential) = %q, %v", name, err)
	}
	if id == 0 || CredentialID(tok) != id {
		t.Fatalf("CredentialID = %x, want %x (non-zero)", CredentialID(tok), id)
	}
	if got := CredentialID("ns_YXBw_00000000000000ff" + strings.Repeat("ab", 24)); got != 255 {
		t.Fatalf("CredentialID of a fixed token = %d, want 255", got)
	}
	for _, bad := range []string{"", "ns_YXBw_", "ns_YXBw_zz"} {
		if got := CredentialID(bad); got != 0 {
			t.Errorf("CredentialID(%q) = %d, want 0", bad, got)
		}
	}
}
