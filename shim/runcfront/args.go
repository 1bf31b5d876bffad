package runcfront

import (
	"path/filepath"
	"strings"
)

// call is a runc command line as go-runc writes it for the runc task
// service: its global flags (the ones its Runc sets for a task), then the
// command and its arguments.
type call struct {
	root string // --root: the runc state root (<root>/<id> per container)
	log  string // --log: <bundle>/log.json
	// plain says the global flags are only --root, --log and --log-format
	// json: no --debug, --systemd-cgroup or --rootless, which change what
	// runc would do.
	plain bool
	args  []string // the command and its arguments
}

// parseCall reads args (os.Args[1:]). Global flags come first, each
// "--name value" or "--name=value", as go-runc's Runc.args writes them.
func parseCall(args []string) call {
	c := call{plain: true}
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, value, inline := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch name {
		case "root", "log", "log-format":
			if !inline {
				if len(args) < 2 {
					c.plain = false
					return c
				}
				value, args = args[1], args[1:]
			}
			switch name {
			case "root":
				c.root = value
			case "log":
				c.log = value
			case "log-format":
				c.plain = c.plain && value == "json"
			}
		default:
			// --debug, --systemd-cgroup, --rootless, --criu: the real
			// runc answers. Whether they take a value is not known here,
			// so nothing after them is read.
			c.plain = false
			return c
		}
		args = args[1:]
	}
	c.args = args
	return c
}

// bundle is the task's bundle: the directory of --log, where go-runc's
// Runc for a task writes runc's log (<bundle>/log.json).
func (c call) bundle() string {
	if c.log == "" || !filepath.IsAbs(c.log) || filepath.Base(c.log) != "log.json" {
		return ""
	}
	return filepath.Dir(filepath.Clean(c.log))
}

// container is the container the call is about when it is `start ID` or
// `delete ID` with no flag of its own, on a state root the front can
// judge; "" otherwise.
func (c call) container(cmd string) string {
	if !c.plain || len(c.args) != 2 || c.args[0] != cmd || !filepath.IsAbs(c.root) || !ValidID(c.args[1]) {
		return ""
	}
	return c.args[1]
}

// ValidID reports whether id is a container id runc accepts
// (libcontainer's validateID: 0-9 A-Z a-z _ + - ., not "." or "..").
func ValidID(id string) bool {
	if id == "" || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '+', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
