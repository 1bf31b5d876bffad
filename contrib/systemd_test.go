package contrib

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gensee/gensee/cmd/gensee/cli"
	"github.com/gensee/gensee/shim/config"
)

// unitFile is a systemd unit: each section's keys, every value in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, name string, b []byte) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line
			u[section] = map[string][]string{}
		case section != "" && strings.Contains(line, "="):
			k, v, _ := strings.Cut(line, "=")
			u[section][k] = append(u[section][k], v)
		default:
			t.Errorf("%s:%d: not a unit line: %q", name, i+1, line)
		}
	}
	return u
}

func (u unitFile) one(section, key string) string {
	if v := u[section][key]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// TestContribSystemdVerify: the timer starts the service hourly and
// catches up a missed run; the service runs gensee manifest verify --all
// on the default operator config from where the kit installs gensee, at
// background priority, and may write the default state dir; and that
// command line is one the CLI accepts (run on an empty state dir as root).
func TestContribSystemdVerify(t *testing.T) {
	k := loadKit(t)
	timer := parseUnit(t, "gensee-verify.timer", k.raw["systemd/gensee-verify.timer"])
	svc := parseUnit(t, "gensee-verify.service", k.raw["systemd/gensee-verify.service"])
	if timer.one("[Timer]", "Persistent") != "true" || timer.one("[Timer]", "OnCalendar") != "hourly" ||
		timer.one("[Timer]", "Unit") != "gensee-verify.service" || timer.one("[Install]", "WantedBy") != "timers.target" {
		t.Errorf("timer %v: want hourly, Persistent=true, Unit=gensee-verify.service, WantedBy=timers.target", timer)
	}
	if svc.one("[Service]", "Type") != "oneshot" {
		t.Errorf("service Type %q, want oneshot", svc.one("[Service]", "Type"))
	}
	if n, err := strconv.Atoi(svc.one("[Service]", "Nice")); err != nil || n <= 0 {
		t.Errorf("service Nice %q: want a positive nice for hashing", svc.one("[Service]", "Nice"))
	}
	if c := svc.one("[Service]", "IOSchedulingClass"); c != "idle" && c != "best-effort" {
		t.Errorf("service IOSchedulingClass %q: want idle or best-effort", c)
	}
	if rw := svc.one("[Service]", "ReadWritePaths"); svc.one("[Service]", "ProtectSystem") == "strict" && rw != config.DefaultStateDir {
		t.Errorf("ReadWritePaths %q under ProtectSystem=strict: want the state dir %s (verify writes events and attention there)", rw, config.DefaultStateDir)
	}
	argv := strings.Fields(svc.one("[Service]", "ExecStart"))
	want := []string{shimDir + "/gensee", "manifest", "verify", "--all", "--config", config.DefaultPath}
	if !slices.Equal(argv, want) {
		t.Fatalf("ExecStart %q, want %q", argv, want)
	}
	if os.Geteuid() != 0 {
		t.Skip("running it needs a root-owned operator config")
	}
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("state_dir = \""+state+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := cli.OSEnv()
	env.Stdout, env.Stderr = &out, &errb
	args := append(slices.Clone(argv[1:len(argv)-1]), cfg)
	if code := cli.Main(context.Background(), env, args); code != cli.ExitOK || !strings.Contains(out.String(), "verified 0 operations") {
		t.Fatalf("gensee %q: exit %d\n%s%s", args, code, out.String(), errb.String())
	}
}
