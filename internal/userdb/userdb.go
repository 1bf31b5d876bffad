// Package userdb looks up accounts and their groups as the C library's NSS
// answers, in a binary built without cgo (the gensee CLI, so that no
// command pays the dynamic loader and libc's start-up): from /etc/passwd
// and /etc/group when /etc/nsswitch.conf consults "files" first, where an
// entry found is the one NSS returns, else through getent(1), which asks
// every source nsswitch.conf lists (systemd, sss, ldap, ...). A group
// list is read from /etc/group only when "files" is the only source of
// group memberships; NSS merges every source's.
package userdb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Files a lookup reads; tests replace them.
var (
	nsswitchConf = "/etc/nsswitch.conf"
	getentPath   = "/usr/bin/getent"
)

// getentTimeout bounds one getent(1) (a remote source may hang).
const getentTimeout = 10 * time.Second

// Lookup is user.Lookup as NSS answers it.
func Lookup(name string) (*user.User, error) {
	if filesFirst("passwd") {
		if u, err := user.Lookup(name); err == nil {
			return u, nil
		}
	}
	u, err := getentUser(name)
	if errors.Is(err, errNotFound) || err == nil && u.Username != name {
		// getent reads a number as a uid: a numeric name that is not one.
		return nil, user.UnknownUserError(name)
	}
	return u, err
}

// LookupId is user.LookupId as NSS answers it.
func LookupId(uid string) (*user.User, error) {
	if filesFirst("passwd") {
		if u, err := user.LookupId(uid); err == nil {
			return u, nil
		}
	}
	u, err := getentUser(uid)
	if errors.Is(err, errNotFound) || err == nil && u.Uid != uid {
		n, perr := strconv.Atoi(uid)
		if perr != nil {
			return nil, fmt.Errorf("user: unknown userid %s", uid)
		}
		return nil, user.UnknownUserIdError(n)
	}
	return u, err
}

// GroupIds is u.GroupIds() as NSS answers it: u's primary group, then
// every group that lists it as a member.
func GroupIds(u *user.User) ([]string, error) {
	db := "initgroups"
	if _, ok := sources(db); !ok {
		db = "group"
	}
	if src, _ := sources(db); slices.Equal(src, []string{"files"}) {
		return u.GroupIds()
	}
	out, err := getent("initgroups", u.Username)
	if err != nil {
		return nil, err
	}
	// "name gid gid ...": the supplementary groups of every source.
	f := strings.Fields(string(out))
	if len(f) == 0 || f[0] != u.Username {
		return nil, fmt.Errorf("getent initgroups %s: unexpected answer %q", u.Username, out)
	}
	ids := []string{u.Gid}
	for _, g := range f[1:] {
		if _, err := strconv.ParseUint(g, 10, 32); err != nil {
			return nil, fmt.Errorf("getent initgroups %s: group %q is not a number", u.Username, g)
		}
		if !slices.Contains(ids, g) {
			ids = append(ids, g)
		}
	}
	return ids, nil
}

// filesFirst: nsswitch.conf's db line consults files first (or there is
// no such line: glibc's default then is files).
func filesFirst(db string) bool {
	src, ok := sources(db)
	return !ok || len(src) > 0 && src[0] == "files"
}

// sources are the services of db's line in nsswitch.conf ([actions]
// left out); ok is false when the file or the line is missing.
func sources(db string) (src []string, ok bool) {
	b, err := os.ReadFile(nsswitchConf)
	if err != nil {
		return nil, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		key, rest, found := strings.Cut(line, ":")
		if !found || strings.TrimSpace(key) != db {
			continue
		}
		inAction := false
		for _, s := range strings.Fields(rest) {
			switch {
			case strings.HasPrefix(s, "["):
				inAction = !strings.HasSuffix(s, "]")
			case inAction:
				inAction = !strings.HasSuffix(s, "]")
			default:
				src = append(src, s)
			}
		}
		return src, true
	}
	return nil, false
}

var errNotFound = errors.New("not found")

// getentUser asks getent passwd for key (a name or a uid).
func getentUser(key string) (*user.User, error) {
	out, err := getent("passwd", key)
	if err != nil {
		return nil, err
	}
	// name:passwd:uid:gid:gecos:home:shell, one line
	line := strings.TrimSuffix(string(out), "\n")
	f := strings.Split(line, ":")
	if len(f) != 7 || strings.Contains(line, "\n") {
		return nil, fmt.Errorf("getent passwd %s: unexpected answer %q", key, out)
	}
	for _, id := range f[2:4] {
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return nil, fmt.Errorf("getent passwd %s: id %q is not a number", key, id)
		}
	}
	name, _, _ := strings.Cut(f[4], ",")
	return &user.User{Username: f[0], Uid: f[2], Gid: f[3], Name: name, HomeDir: f[5]}, nil
}

// getent runs getent(1) db key with an empty environment; errNotFound
// when no source has key (exit status 2).
func getent(db, key string) ([]byte, error) {
	if key == "" || strings.HasPrefix(key, "-") || strings.ContainsAny(key, ":\n") {
		return nil, errNotFound
	}
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, getentPath, db, key)
	c.Env = []string{}
	out, err := c.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		return nil, errNotFound
	case err != nil:
		return nil, fmt.Errorf("getent %s %s (NSS sources other than files): %w", db, key, err)
	}
	return out, nil
}
