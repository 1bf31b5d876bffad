package hostrun

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/gensee/gensee/shim/admission"
)

// Identity is the invoking user the command runs as.
type Identity struct {
	UID, GID uint32
	Name     string // login name; "" when the password database has none
	Home     string // home directory; "/" when unknown
}

// Fact is the identity as the selector's user fact.
func (id Identity) Fact() *admission.User {
	return &admission.User{UID: id.UID, Name: id.Name}
}

// lookupFunc finds a user by uid in the password database.
type lookupFunc func(uid string) (*user.User, error)

// InvokingUser is who asked for the run: the real uid, or, when that is 0
// and sudo set SUDO_UID (and SUDO_GID), the user sudo ran as root. The gid
// is SUDO_GID, else the user's primary group, else the uid's own number.
func InvokingUser(realUID, realGID int, getenv func(string) string, lookup lookupFunc) (Identity, error) {
	uid, gid := uint64(realUID), uint64(realGID)
	if realUID == 0 && getenv("SUDO_UID") != "" {
		var err error
		if uid, err = parseID(getenv("SUDO_UID")); err != nil {
			return Identity{}, fmt.Errorf("SUDO_UID %q: %w", getenv("SUDO_UID"), err)
		}
		gid = uid
		if s := getenv("SUDO_GID"); s != "" {
			if gid, err = parseID(s); err != nil {
				return Identity{}, fmt.Errorf("SUDO_GID %q: %w", s, err)
			}
		}
	}
	id := Identity{UID: uint32(uid), GID: uint32(gid), Home: "/"}
	if lookup == nil {
		return id, nil
	}
	if u, err := lookup(strconv.FormatUint(uid, 10)); err == nil {
		id.Name = u.Username
		if u.HomeDir != "" {
			id.Home = u.HomeDir
		}
		if realUID == 0 && getenv("SUDO_UID") != "" && getenv("SUDO_GID") == "" {
			if g, err := parseID(u.Gid); err == nil {
				id.GID = uint32(g)
			}
		}
	}
	return id, nil
}

// parseID parses a decimal uid or gid below (uid_t)-1.
func parseID(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("not a decimal id below 4294967295")
	}
	return n, nil
}

// NamedUser is the identity of user s, a login name or a decimal uid (a uid
// the password database lacks runs with gid = uid and HOME=/).
func NamedUser(s string, byName func(string) (*user.User, error), byID lookupFunc) (Identity, error) {
	u, err := byName(s)
	if err != nil {
		n, perr := parseID(s)
		if perr != nil {
			return Identity{}, err
		}
		if u, err = byID(s); err != nil {
			return Identity{UID: uint32(n), GID: uint32(n), Home: "/"}, nil
		}
	}
	uid, err := parseID(u.Uid)
	if err != nil {
		return Identity{}, fmt.Errorf("uid %q of %s: %w", u.Uid, s, err)
	}
	gid, err := parseID(u.Gid)
	if err != nil {
		return Identity{}, fmt.Errorf("gid %q of %s: %w", u.Gid, s, err)
	}
	home := u.HomeDir
	if home == "" {
		home = "/"
	}
	return Identity{UID: uint32(uid), GID: uint32(gid), Name: u.Username, Home: home}, nil
}
