package spec

import (
	"regexp"
	"strconv"
	"sync"
)

// userName is the portable login-name shape useradd accepts by default
// (NAME_REGEX), with the trailing '$' of machine accounts.
var userName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}\$?$`) })

// ValidUser reports whether s can be a selector's user fact: a login name
// or a decimal uid (no sign, no leading zeros) below 4294967295, which
// is (uid_t)-1, "no user".
func ValidUser(s string) bool {
	if userName().MatchString(s) {
		return true
	}
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return err == nil && n < 1<<32-1
}
