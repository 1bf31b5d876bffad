package nsfile

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Occupant scans /proc for a process other than except whose network
// namespace is id (0 when there is none): each
// thread group's leader, and the threads of a group whose leader has no
// namespaces left (it exited before its threads).
func Occupant(id ID, except int) (int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return 0, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, fmt.Errorf("list /proc: %w", err)
	}
	in := func(p string) (bool, bool) {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			return false, false
		}
		return st.Dev == id.Dev && st.Ino == id.Ino, true
	}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == except {
			continue
		}
		if yes, ok := in("/proc/" + n + "/ns/net"); ok {
			if yes {
				return pid, nil
			}
			continue
		}
		tasks, _ := os.ReadDir("/proc/" + n + "/task")
		for _, t := range tasks {
			if yes, _ := in("/proc/" + n + "/task/" + t.Name() + "/ns/net"); yes {
				return pid, nil
			}
		}
	}
	return 0, nil
}
