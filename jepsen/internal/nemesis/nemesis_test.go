package nemesis

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"none", nil, false},
		{"", nil, false},
		{"all", Faults, false},
		{"kill,partition", []string{"kill", "partition"}, false},
		{" pause , transfer", []string{"pause", "transfer"}, false},
		{"kill,clock", nil, true},
		{"membership", []string{"membership"}, false},
	}
	for _, tc := range cases {
		got, err := Parse(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
