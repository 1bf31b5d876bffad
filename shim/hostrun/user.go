package hostrun

import (
	"fmt"
	"os"
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

// InvokingUser is who asked for the run, by the kernel's facts (the rule
// is in invoker.go: the real uid, else the nearest
// ancestor whose real uid is not 0 — the account that elevated through
// sudo, su, doas or pkexec — else root). The environment is never read.
// The gid is the user's primary group in the password database, else the
// uid's own number.
func InvokingUser(lookup lookupFunc) (Identity, error) {
	return invokingUser(procfs{}, os.Getpid(), os.Getuid(), lookup)
}

func invokingUser(p procReader, self, realUID int, lookup lookupFunc) (Identity, error) {
	uid, err := invokingUID(p, self, realUID)
	if err != nil {
		return Identity{}, err
	}
	id := Identity{UID: uid, GID: uid, Home: "/"}
	if lookup == nil {
		return id, nil
	}
	if u, err := lookup(strconv.FormatUint(uint64(uid), 10)); err == nil {
		id.Name = u.Username
		if u.HomeDir != "" {
			id.Home = u.HomeDir
		}
		if g, err := parseID(u.Gid); err == nil {
			id.GID = uint32(g)
		}
	}
	return id, nil
}

// RunAs is the identity the command runs as: the invoking user, or the
// account --user names (name, "" when not given). uid 0 never runs the
// command, and only root may name another account: a refusal (reason
// "user") otherwise.
func RunAs(invoking Identity, name string, byName func(string) (*user.User, error), byID lookupFunc) (Identity, *Refusal) {
	if name == "" {
		if invoking.UID == 0 {
			return Identity{}, refuse(ReasonUser, "user", "run it through sudo from the account the command should run as, or as root name that account with --user NAME",
				"the invoking user is root, and uid 0 never runs the command")
		}
		return invoking, nil
	}
	if invoking.UID != 0 {
		return Identity{}, refuse(ReasonUser, "--user", "drop --user: the command runs as you",
			"--user is accepted only when root itself runs gensee boundary run; the invoking user (from the kernel: the account that ran sudo, su or doas) is uid %d", invoking.UID)
	}
	id, err := NamedUser(name, byName, byID)
	if err != nil {
		return Identity{}, refuse(ReasonUser, "--user", "name an account of this host by login name or uid", "--user %s: %v", name, err)
	}
	if id.UID == 0 {
		return Identity{}, refuse(ReasonUser, "--user", "name an unprivileged account", "--user %s is uid 0, and uid 0 never runs the command", name)
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
