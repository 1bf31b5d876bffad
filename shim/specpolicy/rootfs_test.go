package specpolicy

import (
	"errors"
	"path"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

// fakeRootfsHost answers CheckRootfs: every path is a directory reached
// without a symlink unless it lies under one of links; mounted describes
// paths by name (nothing: the root of no mount, nothing beneath).
type fakeRootfsHost struct {
	links   []string
	mounted map[string]MountedFS
}

func (h fakeRootfsHost) Dir(p string) error {
	for _, l := range h.links {
		if under(p, l) {
			return unix.ELOOP
		}
	}
	return nil
}

func (h fakeRootfsHost) Mounted(p string) (MountedFS, error) {
	if err := h.Dir(p); err != nil {
		return MountedFS{}, err
	}
	return h.mounted[p], nil
}

const ctrdRoot = "/var/lib/containerd"

var (
	ovl = ctrdRoot + "/" + OverlaySnapshotter + "/snapshots/"
	nat = ctrdRoot + "/" + NativeSnapshotter + "/snapshots/"
	// BuildKit's containerd worker mounts the step's overlay here and
	// binds it as the task's rootfs.
	bkMerged = "/var/lib/buildkit/containerd-overlayfs/cachemounts/buildkit123"
)

// overlayOpts are the options containerd's overlayfs snapshotter gives an
// active snapshot 3 over layers 2 and 1, after hardenRootfs.
func overlayOpts(extra ...string) []string {
	return append([]string{"index=off", "workdir=" + ovl + "3/work", "upperdir=" + ovl + "3/fs",
		"lowerdir=" + ovl + "2/fs:" + ovl + "1/fs", "metacopy=off", "redirect_dir=nofollow"}, extra...)
}

func TestCheckRootfs(t *testing.T) {
	bkSuper := "rw,lowerdir=" + ovl + "2/fs:" + ovl + "1/fs,upperdir=" + ovl + "5/fs,workdir=" + ovl + "5/work,index=off,metacopy=off,redirect_dir=nofollow,uuid=on"
	host := fakeRootfsHost{
		links: []string{ovl + "9", "/var/lib/linked"},
		mounted: map[string]MountedFS{
			bkMerged:                      {Root: true, Type: "overlay", SuperOptions: bkSuper},
			"/":                           {Root: true, Type: "ext4", Beneath: 30},
			"/srv/hostroot":               {Root: true, Type: "ext4"},
			"/srv/overlay-of-host":        {Root: true, Type: "overlay", SuperOptions: "rw,lowerdir=/usr:/etc,upperdir=/srv/u,workdir=/srv/w"},
			"/srv/overlay-upper-outside":  {Root: true, Type: "overlay", SuperOptions: "rw,lowerdir=" + ovl + "1/fs,upperdir=/srv/u,workdir=" + ovl + "5/work"},
			"/srv/overlay-sub":            {Root: false, Type: "overlay", SuperOptions: bkSuper},
			"/srv/overlay-relative-lower": {Root: true, Type: "overlay", SuperOptions: "rw,lowerdir=2/fs:1/fs,upperdir=" + ovl + "5/fs,workdir=" + ovl + "5/work"},
			"/srv/overlay-escaped":        {Root: true, Type: "overlay", SuperOptions: `rw,lowerdir=` + ovl + `1/fs\054x,upperdir=` + ovl + "5/fs,workdir=" + ovl + "5/work"},
			ovl + "7/fs":                  {Beneath: 1},
			bkMerged + "-sub":             {Root: true, Type: "overlay", SuperOptions: bkSuper, Beneath: 1},
		},
	}
	for _, tc := range []struct {
		name   string
		mounts []RootfsMount
		root   string // containerd_root; ctrdRoot if empty
		field  string // "" admitted
	}{
		{"no rootfs (root.path)", nil, "", ""},
		{"overlayfs snapshot", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts()}}, "", ""},
		{"overlayfs, userxattr and idmapped", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("userxattr", "uidmap=0:100000:65536", "gidmap=0:100000:65536")}}, "", ""},
		{"overlayfs view, read-only", []RootfsMount{{Type: "overlay", Source: "overlay", Options: []string{"index=off", "lowerdir=" + ovl + "2/fs:" + ovl + "1/fs", "ro"}}}, "", ""},
		{"overlayfs one-layer bind", []RootfsMount{{Type: "bind", Source: ovl + "1/fs", Options: []string{"rw", "rbind"}}}, "", ""},
		{"native snapshot bind", []RootfsMount{{Type: "bind", Source: nat + "4", Options: []string{"rbind", "rw"}}}, "", ""},
		{"native view", []RootfsMount{{Type: "bind", Source: nat + "4", Options: []string{"rbind", "ro"}}}, "", ""},
		{"another containerd root", []RootfsMount{{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=/srv/ctrd/" + OverlaySnapshotter + "/snapshots/1/fs"}}}, "/srv/ctrd", ""},
		{"BuildKit's bind of its overlay", []RootfsMount{{Type: "bind", Source: bkMerged, Options: []string{"rbind"}}}, "", ""},

		{"host / rbind rw", []RootfsMount{{Type: "bind", Source: "/", Options: []string{"rbind", "rw"}}}, "", "rootfs[0].source"},
		{"host dir bind ro", []RootfsMount{{Type: "bind", Source: "/srv/hostroot", Options: []string{"bind", "ro"}}}, "", "rootfs[0].source"},
		{"bind of an overlay of host dirs", []RootfsMount{{Type: "bind", Source: "/srv/overlay-of-host", Options: []string{"rbind"}}}, "", "rootfs[0].source (the overlay at /srv/overlay-of-host)"},
		{"bind of an overlay whose upperdir is outside", []RootfsMount{{Type: "bind", Source: "/srv/overlay-upper-outside", Options: []string{"rbind"}}}, "", "rootfs[0].source (the overlay at /srv/overlay-upper-outside)"},
		{"bind of a directory inside an overlay", []RootfsMount{{Type: "bind", Source: "/srv/overlay-sub", Options: []string{"rbind"}}}, "", "rootfs[0].source"},
		{"bind of an overlay with relative lowerdirs", []RootfsMount{{Type: "bind", Source: "/srv/overlay-relative-lower", Options: []string{"rbind"}}}, "", "rootfs[0].source (the overlay at /srv/overlay-relative-lower)"},
		{"bind of an overlay with an escaped lowerdir", []RootfsMount{{Type: "bind", Source: "/srv/overlay-escaped", Options: []string{"rbind"}}}, "", "rootfs[0].source"},
		{"BuildKit's overlay with a mount beneath", []RootfsMount{{Type: "bind", Source: bkMerged + "-sub", Options: []string{"rbind"}}}, "", "rootfs[0].source"},
		{"snapshot with a mount beneath", []RootfsMount{{Type: "bind", Source: ovl + "7/fs", Options: []string{"rbind", "rw"}}}, "", "rootfs[0].source"},
		{"lowerdir outside the root", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("lowerdir=/")}}, "", "rootfs[0]"},
		{"lowerdir among layers outside", []RootfsMount{{Type: "overlay", Source: "overlay", Options: []string{"upperdir=" + ovl + "3/fs", "workdir=" + ovl + "3/work", "lowerdir=" + ovl + "2/fs:/etc"}}}, "", "rootfs[0]"},
		{"upperdir outside the root", []RootfsMount{{Type: "overlay", Source: "overlay", Options: []string{"upperdir=/etc", "workdir=" + ovl + "3/work", "lowerdir=" + ovl + "2/fs"}}}, "", "rootfs[0]"},
		{"workdir is another snapshot's fs", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("workdir=" + ovl + "3/fs")}}, "", "rootfs[0]"},
		{"upperdir with ..", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("upperdir=" + ovl + "3/fs/../../../../../../etc")}}, "", "rootfs[0]"},
		{"upperdir with .. that stays inside", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("upperdir=" + ovl + "3/../3/fs")}}, "", "rootfs[0]"},
		{"bind source with ..", []RootfsMount{{Type: "bind", Source: ovl + "1/fs/../../../../..", Options: []string{"rbind", "rw"}}}, "", "rootfs[0].source"},
		{"bind source with a trailing slash", []RootfsMount{{Type: "bind", Source: ovl + "1/fs/", Options: []string{"rbind", "rw"}}}, "", "rootfs[0].source"},
		{"snapshot path not a number", []RootfsMount{{Type: "bind", Source: ovl + "x/fs", Options: []string{"rbind", "rw"}}}, "", "rootfs[0].source"},
		{"inside a snapshot", []RootfsMount{{Type: "bind", Source: ovl + "1/fs/etc", Options: []string{"rbind", "rw"}}}, "", "rootfs[0].source"},
		{"symlinked snapshot dir", []RootfsMount{{Type: "bind", Source: ovl + "9/fs", Options: []string{"rbind", "rw"}}}, "", "rootfs[0].source"},
		{"symlinked lowerdir", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("lowerdir=" + ovl + "9/fs")}}, "", "rootfs[0]"},
		{"symlinked containerd root", []RootfsMount{{Type: "bind", Source: "/var/lib/linked/" + NativeSnapshotter + "/snapshots/1", Options: []string{"rbind"}}}, "/var/lib/linked", "rootfs[0].source"},
		{"snapshot of the stock root, another root configured", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts()}}, "/srv/ctrd", "rootfs[0]"},
		{"unknown type", []RootfsMount{{Type: "ext4", Source: "/dev/sda1"}}, "", "rootfs[0].type"},
		{"tmpfs", []RootfsMount{{Type: "tmpfs", Source: "tmpfs"}}, "", "rootfs[0].type"},
		{"rbind type", []RootfsMount{{Type: "rbind", Source: ovl + "1/fs", Options: []string{"rbind"}}}, "", "rootfs[0].type"},
		{"fuse", []RootfsMount{{Type: "fuse.sshfs", Source: "host:/"}}, "", "rootfs[0].type"},
		{"overlay index=on", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("index=on")}}, "", "rootfs[0].options"},
		{"overlay volatile", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("volatile")}}, "", "rootfs[0].options"},
		{"overlay lowerdir+", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("lowerdir+=/etc")}}, "", "rootfs[0].options"},
		{"overlay with two options in one", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("index=off,upperdir=/")}}, "", "rootfs[0].options"},
		{"overlay escaped lowerdir", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts(`lowerdir=` + ovl + `1/fs\:/etc`)}}, "", "rootfs[0].options"},
		{"overlay without lowerdir", []RootfsMount{{Type: "overlay", Source: "overlay", Options: []string{"upperdir=" + ovl + "3/fs", "workdir=" + ovl + "3/work"}}}, "", "rootfs[0].options"},
		{"overlay with another source", []RootfsMount{{Type: "overlay", Source: "/dev/sda1", Options: overlayOpts()}}, "", "rootfs[0].source"},
		{"bad uidmap", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts("uidmap=0:0:4294967296x")}}, "", "rootfs[0].options"},
		{"bind remount", []RootfsMount{{Type: "bind", Source: ovl + "1/fs", Options: []string{"rbind", "remount"}}}, "", "rootfs[0].options"},
		{"bind loop", []RootfsMount{{Type: "bind", Source: ovl + "1/fs", Options: []string{"rbind", "loop"}}}, "", "rootfs[0].options"},
		{"bind rshared", []RootfsMount{{Type: "bind", Source: ovl + "1/fs", Options: []string{"rbind", "rshared"}}}, "", "rootfs[0].options"},
		{"bind X-containerd", []RootfsMount{{Type: "bind", Source: ovl + "1/fs", Options: []string{"rbind", "X-containerd.mkdir.path=/etc/x"}}}, "", "rootfs[0].options"},
		{"bind type without bind option", []RootfsMount{{Type: "bind", Source: ovl + "1/fs", Options: []string{"rw"}}}, "", "rootfs[0].options"},
		{"relative bind source", []RootfsMount{{Type: "bind", Source: "snapshots/1/fs", Options: []string{"rbind"}}}, "", "rootfs[0].source"},
		{"a target", []RootfsMount{{Type: "bind", Source: ovl + "1/fs", Target: "/etc", Options: []string{"rbind"}}}, "", "rootfs[0].target"},
		{"two mounts", []RootfsMount{{Type: "overlay", Source: "overlay", Options: overlayOpts()}, {Type: "bind", Source: "/", Target: "/host", Options: []string{"rbind"}}}, "", "rootfs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root
			if root == "" {
				root = ctrdRoot
			}
			err := CheckRootfs(tc.mounts, root, host)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var rf *spec.Refusal
			if !errors.As(err, &rf) {
				t.Fatalf("admitted (%v), want a refusal at %s", err, tc.field)
			}
			if rf.Reason != RuleRootfsMount || rf.Field != tc.field {
				t.Fatalf("refusal %s at %s, want %s at %s: %v", rf.Reason, rf.Field, RuleRootfsMount, tc.field, rf)
			}
			if msg := strings.TrimPrefix(rf.Message, rf.Field+": "); !strings.Contains(msg, "; ") && !strings.Contains(msg, ": ") {
				t.Fatalf("refusal without a fix: %v", rf)
			}
		})
	}
}

// The host's / is refused as the host path it is, before what an rbind
// of it would carry.
func TestCheckRootfsHostRoot(t *testing.T) {
	host := fakeRootfsHost{mounted: map[string]MountedFS{"/": {Root: true, Type: "ext4", Beneath: 30}}}
	err := CheckRootfs([]RootfsMount{{Type: "bind", Source: "/", Options: []string{"rbind", "rw"}}}, ctrdRoot, host)
	if err == nil || !strings.Contains(err.Error(), "rootfs_mount: rootfs[0].source: the rootfs binds host path /,") || !strings.Contains(err.Error(), "read-only root.path") {
		t.Fatalf("bind of /: %v", err)
	}
}

func TestSnapshotPath(t *testing.T) {
	r := ctrdRoot + "/" + OverlaySnapshotter
	for _, tc := range []struct {
		p, suffix string
		want      bool
	}{
		{r + "/snapshots/1/fs", "fs", true},
		{r + "/snapshots/12345/work", "work", true},
		{r + "/snapshots/1/work", "fs", false},
		{r + "/snapshots//fs", "fs", false},
		{r + "/snapshots/1/fs/", "fs", false},
		{r + "/snapshots/-1/fs", "fs", false},
		{r + "/snapshots/1", "fs", false},
		{r + "/snapshots/1", "", true},
		{r + "/snapshots/1/x", "", false},
		{r + "/snapshots/./1/fs", "fs", false},
		{r + "/snapshotsX/1/fs", "fs", false},
		{r + "/snapshots/1/fs\x00", "fs", false},
	} {
		if got := snapshotPath(tc.p, r, tc.suffix); got != tc.want {
			t.Errorf("snapshotPath(%q, %q) = %v, want %v", tc.p, tc.suffix, got, tc.want)
		}
	}
}

// FuzzCheckRootfs: whatever the client sends, an admitted mount names only
// snapshot directories under the root (checked by a second reading that
// shares nothing with CheckRootfs but the layout).
func FuzzCheckRootfs(f *testing.F) {
	f.Add("overlay", "overlay", strings.Join(overlayOpts(), "\x00"))
	f.Add("bind", "/", "rbind\x00rw")
	f.Add("bind", ovl+"1/fs", "rbind\x00rw")
	f.Add("overlay", "overlay", "lowerdir="+ovl+"1/fs:/etc")
	f.Fuzz(func(t *testing.T, typ, src, opts string) {
		o := strings.Split(opts, "\x00")
		err := CheckRootfs([]RootfsMount{{Type: typ, Source: src, Options: o}}, ctrdRoot, fakeRootfsHost{})
		if err != nil {
			return
		}
		inside := func(p string) bool {
			return path.Clean(p) == p && (strings.HasPrefix(p, ovl) || strings.HasPrefix(p, nat)) && !strings.Contains(p, "..")
		}
		switch typ {
		case "bind":
			if !inside(src) {
				t.Fatalf("bind of %q admitted", src)
			}
		case "overlay":
			for _, x := range o {
				k, v, _ := strings.Cut(x, "=")
				if k == "lowerdir" || k == "upperdir" || k == "workdir" {
					for _, d := range strings.Split(v, ":") {
						if !inside(d) {
							t.Fatalf("overlay %s %q admitted", k, d)
						}
					}
				}
			}
		default:
			t.Fatalf("type %q admitted", typ)
		}
	})
}
