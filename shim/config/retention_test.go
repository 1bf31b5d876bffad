package config

import (
	"strings"
	"testing"
	"time"
)

func TestRetentionDefaults(t *testing.T) {
	c, err := Parse("/etc/gensee/config.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Retention{MaxAge: Age{30 * 24 * time.Hour}, MaxCount: 5000, MaxBytes: 8 << 30}
	if c.Retention != want {
		t.Fatalf("retention = %+v, want %+v", c.Retention, want)
	}
}

func TestRetentionKeys(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		want       Retention
	}{
		{"units", "[retention]\nmax_age = \"24h\"\nmax_count = 10\nmax_bytes = \"512MiB\"\n",
			Retention{MaxAge: Age{24 * time.Hour}, MaxCount: 10, MaxBytes: 512 << 20}},
		{"integer bytes", "[retention]\nmax_bytes = 4096\n",
			Retention{MaxAge: Age{DefaultRetentionMaxAge}, MaxCount: DefaultRetentionMaxCount, MaxBytes: 4096}},
		{"limits lifted", "[retention]\nmax_age = \"0s\"\nmax_count = 0\nmax_bytes = 0\n", Retention{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("/x.toml", []byte(tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			if c.Retention != tc.want {
				t.Fatalf("retention = %+v, want %+v", c.Retention, tc.want)
			}
		})
	}
}

func TestRetentionRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[retention]\nmax_age = \"-1h\"\n", "must not be negative"},
		{"[retention]\nmax_count = -1\n", "max_count -1 must not be negative"},
		{"[retention]\nmax_bytes = -5\n", "max_bytes -5 must not be negative"},
		{"[retention]\nmax_bytes = \"8GB\"\n", "unit B, KiB, MiB, GiB or TiB"},
		{"[retention]\nmax_files = 3\n", "[retention] max_age, max_count, max_bytes"},
	} {
		_, err := Parse("/x.toml", []byte(tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.toml, err, tc.want)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	for v, want := range map[ByteSize]string{0: "0B", 1: "1B", 1024: "1KiB", 8 << 30: "8GiB", 1536: "1536B", 3 << 20: "3MiB"} {
		if got := v.String(); got != want {
			t.Errorf("%d: %q, want %q", int64(v), got, want)
		}
	}
}
