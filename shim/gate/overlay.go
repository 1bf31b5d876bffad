package gate

import (
	"errors"
	"fmt"
	"strings"
)

// HardenOverlayOptions returns overlay mount options with metacopy and
// redirect_dir forced to the only values the gate can trust:
// metacopy=off (an upper file then always holds its data) and
// redirect_dir=nofollow (a renamed lower directory is copied, not
// redirected, and existing redirects are not followed). Any existing
// metacopy=/redirect_dir= option is dropped so no later value overrides
// ours. Use it at Create, before mounting the rootfs.
func HardenOverlayOptions(opts []string) []string {
	out := make([]string, 0, len(opts)+2)
	for _, o := range opts {
		if strings.HasPrefix(o, "metacopy=") || strings.HasPrefix(o, "redirect_dir=") {
			continue
		}
		out = append(out, o)
	}
	return append(out, "metacopy=off", "redirect_dir=nofollow")
}

// OverlayDirs are the directories named by overlay mount options.
type OverlayDirs struct {
	Upper     string
	Work      string
	Lowers    []string // top first
	UserXattr bool
}

// UpperDir returns the upperdir= of overlay mount options.
func UpperDir(opts []string) (string, bool) {
	d, err := ParseOverlayOptions(opts)
	if err != nil || d.Upper == "" {
		return "", false
	}
	return d.Upper, true
}

// ParseOverlayOptions extracts upperdir, workdir, the lowerdir list (both
// "lowerdir=a:b" with '\'-escaped colons and repeated "lowerdir+=a") and
// userxattr. Data-only layers (datadir+=, "::") only make sense with
// metacopy and are refused.
func ParseOverlayOptions(opts []string) (OverlayDirs, error) {
	var d OverlayDirs
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch {
		case o == "userxattr":
			d.UserXattr = true
		case k == "upperdir":
			d.Upper = v
		case k == "workdir":
			d.Work = v
		case k == "lowerdir":
			if strings.Contains(v, "::") {
				return d, errors.New("overlay options: data-only lower layers (::) are not supported by the gate")
			}
			d.Lowers = splitLowers(v)
		case k == "lowerdir+":
			d.Lowers = append(d.Lowers, v)
		case k == "datadir+":
			return d, errors.New("overlay options: data-only lower layers (datadir+=) are not supported by the gate")
		}
	}
	for _, l := range d.Lowers {
		if !strings.HasPrefix(l, "/") {
			return d, fmt.Errorf("overlay options: lowerdir %q is not absolute", l)
		}
	}
	if d.Upper != "" && !strings.HasPrefix(d.Upper, "/") {
		return d, fmt.Errorf("overlay options: upperdir %q is not absolute", d.Upper)
	}
	return d, nil
}

// splitLowers splits a lowerdir= value on unescaped colons.
func splitLowers(v string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v):
			i++
			cur.WriteByte(v[i])
		case v[i] == ':':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(v[i])
		}
	}
	return append(out, cur.String())
}
