package gate

import (
	"reflect"
	"testing"
)

func TestParseMountinfoOverlay(t *testing.T) {
	cases := []struct {
		in      string
		want    OverlayDirs
		wantErr bool
	}{
		{in: "rw,lowerdir=/l/2:/l/1,upperdir=/u,workdir=/w", want: OverlayDirs{Upper: "/u", Work: "/w", Lowers: []string{"/l/2", "/l/1"}}},
		{in: `rw,lowerdir=/a\040b:/c\054d,upperdir=/u\011x,workdir=/w,userxattr`, want: OverlayDirs{Upper: "/u\tx", Work: "/w", Lowers: []string{"/a b", "/c,d"}, UserXattr: true}},
		// a colon typed as "\:" in a lower path: the kernel shows the backslash escaped
		{in: `ro,lowerdir=/a\134:b:/c`, want: OverlayDirs{Lowers: []string{"/a:b", "/c"}}},
		{in: "rw,lowerdir+=/a,lowerdir+=/b,upperdir=/u,workdir=/w", want: OverlayDirs{Upper: "/u", Work: "/w", Lowers: []string{"/a", "/b"}}},
		{in: "rw,lowerdir=/a,datadir+=/d", wantErr: true},
		{in: "rw,lowerdir=a,upperdir=/u", wantErr: true},
		{in: `rw,upperdir=/u\04`, wantErr: true},
		{in: `rw,upperdir=/u\x41`, wantErr: true},
	}
	for _, tc := range cases {
		got, err := ParseMountinfoOverlay(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseMountinfoOverlay(f *testing.F) {
	f.Add("rw,lowerdir=/l/2:/l/1,upperdir=/u,workdir=/w")
	f.Add(`rw,lowerdir=/a\040b,upperdir=/u\134:x`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseMountinfoOverlay(s)
		if err != nil {
			return
		}
		for _, l := range d.Lowers {
			if l == "" || l[0] != '/' {
				t.Fatalf("%q: relative lower %q accepted", s, l)
			}
		}
		if d.Upper != "" && d.Upper[0] != '/' {
			t.Fatalf("%q: relative upper %q accepted", s, d.Upper)
		}
	})
}
