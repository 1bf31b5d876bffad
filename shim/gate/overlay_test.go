package gate

import (
	"reflect"
	"testing"
)

func TestHardenOverlayOptions(t *testing.T) {
	in := []string{"index=off", "metacopy=on", "lowerdir=/l", "redirect_dir=on", "upperdir=/u"}
	got := HardenOverlayOptions(in)
	want := []string{"index=off", "lowerdir=/l", "upperdir=/u", "metacopy=off", "redirect_dir=nofollow"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("HardenOverlayOptions = %v, want %v", got, want)
	}
	if in[1] != "metacopy=on" {
		t.Fatal("HardenOverlayOptions modified its input")
	}
}

func TestParseOverlayOptions(t *testing.T) {
	d, err := ParseOverlayOptions([]string{"workdir=/w", "upperdir=/s/2/fs", `lowerdir=/s/1/fs:/s/0/a\:b`, "userxattr", "index=off"})
	if err != nil {
		t.Fatal(err)
	}
	want := OverlayDirs{Upper: "/s/2/fs", Work: "/w", Lowers: []string{"/s/1/fs", "/s/0/a:b"}, UserXattr: true}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	d, err = ParseOverlayOptions([]string{"lowerdir+=/a", "lowerdir+=/b", "upperdir=/u"})
	if err != nil || !reflect.DeepEqual(d.Lowers, []string{"/a", "/b"}) {
		t.Fatalf("lowerdir+=: %+v %v", d, err)
	}
	if up, ok := UpperDir([]string{"upperdir=/u", "lowerdir=/l"}); !ok || up != "/u" {
		t.Fatalf("UpperDir = %q %v", up, ok)
	}
	if _, ok := UpperDir([]string{"rbind"}); ok {
		t.Fatal("UpperDir found an upperdir in bind options")
	}
	for _, bad := range [][]string{{"lowerdir=/a::/b"}, {"datadir+=/d"}, {"lowerdir=rel"}, {"upperdir=rel"}} {
		if _, err := ParseOverlayOptions(bad); err == nil {
			t.Errorf("ParseOverlayOptions(%q) accepted", bad)
		}
	}
}

func FuzzParseOverlayOptions(f *testing.F) {
	f.Add("upperdir=/u", `lowerdir=/a\:b:/c`, "userxattr")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		d, err := ParseOverlayOptions([]string{a, b, c})
		if err == nil {
			for _, l := range d.Lowers {
				if len(l) == 0 || l[0] != '/' {
					t.Fatalf("accepted relative lowerdir %q", l)
				}
			}
		}
		h := HardenOverlayOptions([]string{a, b, c})
		if h[len(h)-2] != "metacopy=off" || h[len(h)-1] != "redirect_dir=nofollow" {
			t.Fatalf("not hardened: %v", h)
		}
	})
}
