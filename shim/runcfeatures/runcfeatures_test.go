package runcfeatures

import "testing"

func TestSeccompEnabled(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
		err  bool
	}{
		{`{"ociVersionMin":"1.0.0","linux":{"seccomp":{"enabled":true,"actions":["SCMP_ACT_ERRNO"]}}}`, true, false},
		{`{"linux":{"seccomp":{"enabled":false}}}`, false, false},
		{`{"linux":{}}`, false, false},
		{`not json`, false, true},
	} {
		got, err := SeccompEnabled([]byte(tc.in))
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: %v %v", tc.in, got, err)
		}
	}
}
