package userdb

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"testing"
)

func conf(t *testing.T, body string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nsswitch.conf")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := nsswitchConf
	nsswitchConf = p
	t.Cleanup(func() { nsswitchConf = saved })
}

// fakeGetent installs a getent(1) that answers from a script.
func fakeGetent(t *testing.T, script string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "getent")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := getentPath
	getentPath = p
	t.Cleanup(func() { getentPath = saved })
}

func TestSources(t *testing.T) {
	conf(t, "# x\npasswd:  files [NOTFOUND=return] systemd # c\ngroup: sss [ SUCCESS=continue ] files\n")
	if s, ok := sources("passwd"); !ok || !slices.Equal(s, []string{"files", "systemd"}) {
		t.Errorf("passwd %v %v", s, ok)
	}
	if s, ok := sources("group"); !ok || !slices.Equal(s, []string{"sss", "files"}) {
		t.Errorf("group %v %v", s, ok)
	}
	if _, ok := sources("initgroups"); ok {
		t.Error("initgroups found")
	}
	if !filesFirst("passwd") || filesFirst("group") || !filesFirst("initgroups") {
		t.Error("filesFirst")
	}
}

// TestLookupSources: an account in /etc/passwd is the files entry when
// files comes first; one files lacks, or any when another source comes
// first, is getent's; none anywhere is an unknown user.
func TestLookupSources(t *testing.T) {
	fakeGetent(t, `case "$2" in
ldapuser|70001) echo 'ldapuser:*:70001:70001:LDAP User,,,:/home/ldapuser:/bin/bash';;
liar) echo 'root:x:0:0:root:/root:/bin/sh';;
70003) echo 'other:x:70004:70004::/:/bin/sh';;
root) echo 'root:x:0:0:shadowed by another source:/elsewhere:/bin/sh';;
*) exit 2;;
esac`)
	conf(t, "passwd: files ldap\n")
	if u, err := Lookup("root"); err != nil || u.HomeDir != "/root" {
		t.Errorf("files first, root: %+v %v", u, err)
	}
	if u, err := Lookup("ldapuser"); err != nil || u.Uid != "70001" || u.Name != "LDAP User" || u.HomeDir != "/home/ldapuser" {
		t.Errorf("ldap user: %+v %v", u, err)
	}
	if u, err := LookupId("70001"); err != nil || u.Username != "ldapuser" {
		t.Errorf("ldap uid: %+v %v", u, err)
	}
	if _, err := Lookup("nosuchuser"); err == nil {
		t.Error("unknown user found")
	} else if _, ok := err.(user.UnknownUserError); !ok {
		t.Errorf("unknown user: %T %v", err, err)
	}
	if _, err := LookupId("70002"); err == nil {
		t.Error("unknown uid found")
	} else if _, ok := err.(user.UnknownUserIdError); !ok {
		t.Errorf("unknown uid: %T %v", err, err)
	}
	if u, err := Lookup("liar"); err == nil {
		t.Errorf("an answer for another name accepted: %+v", u)
	}
	if u, err := LookupId("70003"); err == nil {
		t.Errorf("an answer for another uid accepted: %+v", u)
	}
	if _, err := Lookup("-x"); err == nil {
		t.Error("an option as a name reached getent")
	}
	conf(t, "passwd: ldap files\n")
	if u, err := Lookup("root"); err != nil || u.HomeDir != "/elsewhere" {
		t.Errorf("ldap first, root: %+v %v", u, err)
	}
}

// TestGroupIds: files alone read /etc/group; another source is asked
// through getent initgroups, the primary group first.
func TestGroupIds(t *testing.T) {
	fakeGetent(t, `[ "$1" = initgroups ] && [ "$2" = ldapuser ] && echo 'ldapuser             70010 27' && exit 0; exit 2`)
	u := &user.User{Username: "ldapuser", Uid: "70001", Gid: "70001"}
	conf(t, "group: files systemd\n")
	if ids, err := GroupIds(u); err != nil || !slices.Equal(ids, []string{"70001", "70010", "27"}) {
		t.Errorf("files systemd: %v %v", ids, err)
	}
	conf(t, "group: files systemd\ninitgroups: files\n")
	root, err := user.LookupId("0")
	if err != nil {
		t.Skip(err)
	}
	if ids, err := GroupIds(root); err != nil || !slices.Contains(ids, "0") {
		t.Errorf("initgroups files: %v %v", ids, err)
	}
}
