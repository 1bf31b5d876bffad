package gate

import (
	"fmt"
	"strings"
)

// ParseMountinfoOverlay reads the directories of a mounted overlay from its
// super options as /proc/self/mountinfo shows them (field 11, e.g.
// "rw,lowerdir=/a:/b,upperdir=/u,workdir=/w"): moby/sys/mountinfo's
// Info.VFSOptions, which that library leaves escaped (it unescapes only the
// mount point, root, source and type). The kernel prints each
// option value with seq_show_option, which octal-escapes ',', ' ', tab,
// newline and '\' (a lowerdir colon typed as "\:" shows as "\134:"), so the
// options are split on raw commas, unescaped, and then read like mount
// options (ParseOverlayOptions). It is how the gate finds the upperdir of an
// overlay a client mounted itself and handed the task as a bind (BuildKit's
// containerd worker).
func ParseMountinfoOverlay(superOptions string) (OverlayDirs, error) {
	var opts []string
	for _, raw := range strings.Split(superOptions, ",") {
		o, err := unescapeOctal(raw)
		if err != nil {
			return OverlayDirs{}, fmt.Errorf("overlay super options: %w", err)
		}
		opts = append(opts, o)
	}
	return ParseOverlayOptions(opts)
}

// unescapeOctal undoes the kernel's \NNN escapes; any other backslash is an
// error, since the kernel escapes the backslash itself.
func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		v := 0
		for _, c := range []byte(s[i+1 : i+4]) {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}
