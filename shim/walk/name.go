package walk

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckName returns why name is unacceptable as a path component of a
// product or patch, or "" when it is fine. Rejected: empty, longer than 255
// bytes, made only of dots ("." "..", "..."), invalid UTF-8, '/', NUL and
// any Unicode control or line/paragraph separator (newlines would make
// listings ambiguous).
func CheckName(name string) string {
	switch {
	case name == "":
		return "empty name"
	case len(name) > 255:
		return "name longer than 255 bytes"
	case strings.Trim(name, ".") == "":
		return "name made only of dots"
	case !utf8.ValidString(name):
		return "name is not valid UTF-8"
	}
	for _, r := range name {
		switch {
		case r == '/':
			return "name contains '/'"
		case unicode.IsControl(r):
			return "name contains a control character"
		case r == '\u2028' || r == '\u2029':
			return "name contains a line separator"
		}
	}
	return ""
}
