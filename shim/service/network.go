package service

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/telemetry"
	"github.com/gensee/gensee/spec"
)

// bind identifies the created init, opens its netns, records the
// upperdir's baseline and installs the operation's table there, read back
// against the plan. The init is still blocked in `runc init`: no image
// code has run.
func (op *operation) bind(ctx context.Context, pid int) error {
	began := time.Now()
	sub, err := readSubject(pid)
	if err != nil {
		return err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return fmt.Errorf("open netns of init %d: %w", pid, err)
	}
	// Re-check the pid is still our init now that the netns fd is held.
	if again, err := readSubject(pid); err != nil || again.StartTime != sub.StartTime {
		f.Close()
		return fmt.Errorf("init %d changed while binding the boundary", pid)
	}
	op.initPID = pid
	if err := op.checkNetns(f); err != nil {
		f.Close()
		return err
	}
	if err := freshCgroup(sub.CgroupPath, pid); err != nil {
		f.Close()
		return err
	}
	op.admission.Subject = sub
	// Before the table, while nothing of the image has run: what the
	// upperdir holds now is not the task's (takeBaseline).
	if err := op.takeBaseline(ctx); err != nil {
		f.Close()
		return err
	}
	_, err = op.net.Bind(ctx, engine.BindSpec{
		OperationID: op.id, Network: op.contract.Network, Netns: f, LogGroup: op.cfg.LogGroup,
		Cgroup: netpolicy.CgroupRef{ID: sub.CgroupID, Level: cgroup.Level(sub.CgroupPath), Path: sub.CgroupPath},
		Monitor: telemetry.Config{OperationID: op.id, Store: op.store, Ctx: op.ctx, Pub: op.pub,
			Logger: op.logger(op.ctx), Notify: notifier(op).Finding},
		// The bundle marker names the table before it exists: a shim that
		// dies between the two (SIGKILL, OOM) leaves a marker whose table
		// may not exist, which `shim delete`'s cleanup removes if present,
		// never a table in a shared (host, pod) netns no marker names.
		Mark: op.markTable,
	})
	if err != nil {
		return err
	}
	op.admission.Timing = &spec.AdmissionTiming{AdmitMS: ms(op.admitTook), BindMS: ms(time.Since(began))}
	op.recorded = op.recordBound()
	return nil
}

// markTable writes the bundle marker naming the table, the operation's
// netns and its init (cleanupBundle reads it), before the table exists.
func (op *operation) markTable(table string) error {
	op.admission.Table = table
	if err := op.writeMarker(); err != nil {
		return fmt.Errorf("write bundle marker: %w", err)
	}
	return nil
}

// recordBound makes admission.json (now naming the subject and the table)
// and the capability_removed event durable off Create's path; it returns
// the wait for them, which Start calls before the inner Start: both are on
// disk before any image code runs, and a failure refuses the Start.
// admission.json and the events log are separate files: their fsyncs run
// side by side and share the journal commit.
func (op *operation) recordBound() func() error {
	return inBackground(func() error {
		written := make(chan error, 1)
		go func() { written <- op.store.WriteJSON(op.id, record.AdmissionFile, op.admission) }()
		return <-written
	})
}

// checkNetns verifies the netns the init is really in: the one admission
// checked when it was joined by path (a path swapped in between would
// name another), and in every case one owned by the initial user
// namespace, whose root is the only one that can change the table.
func (op *operation) checkNetns(f *os.File) error {
	if op.wantNetns != (nsID{}) {
		got, err := nsIDOf(f)
		if err != nil {
			return err
		}
		if got != op.wantNetns {
			return fmt.Errorf("the init joined another network namespace than the one admitted (%s)", op.admission.NetnsPath)
		}
		if op.netnsAlone {
			// Admitted empty: another container created beside this one
			// may have joined it since (both were checked before runc).
			if pid, err := (kernelNS{}).occupant(got, op.initPID); err != nil || pid != 0 {
				return fmt.Errorf("netns_in_use: another process (%d) joined the network namespace %s while the task was created: %v; join a network namespace no process is in", pid, op.admission.NetnsPath, err)
			}
		}
	}
	if op.userns {
		// The user namespace the init is really in: the one admitted when
		// joined by path (a path swapped since names another), and in any
		// case one host root (or the pod's mapped root) made below the
		// host's — runc's own, or the pod's.
		uf, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", op.initPID))
		if err != nil {
			return fmt.Errorf("open the init's user namespace: %w", err)
		}
		id, err := nsIDOf(uf)
		if err == nil && op.wantUserns != (nsID{}) && id != op.wantUserns {
			err = fmt.Errorf("the init joined another user namespace than the one admitted")
		}
		if err == nil {
			err = usernsOwnedForContainer(uf, op.uidMappings)
		}
		uf.Close()
		if err != nil {
			return fmt.Errorf("the init's user namespace: %w", err)
		}
	}
	ok, err := ownedByInitialUserns(f)
	if err != nil {
		return err
	}
	if !ok && op.userns {
		// The container's own user namespace may own it (runc made both,
		// or a pod's): its root holds no NET_ADMIN there (the allowlist).
		owner, oerr := ownerOf(f)
		own, uerr := nsIDOfPath(fmt.Sprintf("/proc/%d/ns/user", op.initPID))
		ok = oerr == nil && uerr == nil && owner == own
	}
	if !ok {
		return fmt.Errorf("the init's network namespace is owned by a user namespace that is neither the host's nor the container's, whose root could delete the table")
	}
	return nil
}

// refuseBusyCgroup refuses, before runc runs, a linux.cgroupsPath (the
// cgroupfs form, "/a/b") that names an existing cgroup with processes or
// children: runc would join it. The systemd form is checked after create
// (freshCgroup) only.
func refuseBusyCgroup(path string) error {
	if !strings.HasPrefix(path, "/") {
		return nil
	}
	h, err := cgroup.Find()
	if err != nil {
		return nil // bind refuses the task without cgroup2 anyway
	}
	dir, err := h.Dir(path)
	if err != nil {
		return nil
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil // does not exist yet: runc makes it
	}
	ents, _ := os.ReadDir(dir)
	sub := 0
	for _, e := range ents {
		if e.IsDir() {
			sub++
		}
	}
	if n := len(strings.Fields(string(procs))); n > 0 || sub > 0 {
		return refuse("cgroup_not_own", "linux.cgroupsPath %s names an existing cgroup with %d processes and %d child cgroups; the network table and the exit drain would govern them too: give the container a cgroup of its own", path, n, sub)
	}
	return nil
}

// freshCgroup requires the init's cgroup to hold the init alone and no
// child cgroups: a spec's linux.cgroupsPath may name an existing cgroup
// (another container's, a host service's), which runc joins with a
// warning; the table would then govern those processes and the exit drain
// would kill them.
func freshCgroup(path string, pid int) error {
	h, err := cgroup.Find()
	if err != nil {
		return err
	}
	dir, err := h.Dir(path)
	if err != nil {
		return err
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("read cgroup.procs of %s: %w", path, err)
	}
	if f := strings.Fields(string(procs)); len(f) != 1 || f[0] != strconv.Itoa(pid) {
		return fmt.Errorf("the container's cgroup %s already holds other processes (%d): linux.cgroupsPath must name a cgroup of its own", path, len(f))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read cgroup %s: %w", path, err)
	}
	for _, e := range ents {
		if e.IsDir() {
			return fmt.Errorf("the container's cgroup %s has a child cgroup %s: linux.cgroupsPath must name a cgroup of its own", path, e.Name())
		}
	}
	return nil
}

// readSubject reads who pid is: start time, cgroup v2 path and id.
func readSubject(pid int) (*spec.Subject, error) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, fmt.Errorf("read stat of init %d: %w", pid, err)
	}
	start, err := startTime(st)
	if err != nil {
		return nil, fmt.Errorf("stat of init %d: %w", pid, err)
	}
	path, err := cgroup.PathOf(pid)
	if err != nil {
		return nil, err
	}
	id, err := cgroup.ID(path)
	if err != nil {
		return nil, err
	}
	return &spec.Subject{InitPID: pid, StartTime: start, CgroupPath: path, CgroupID: id}, nil
}

// startTime is field 22 of /proc/<pid>/stat; the comm field (2) may hold
// spaces and parentheses, so fields are counted after its last ')'.
func startTime(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat")
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("malformed stat: %d fields after comm", len(f))
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}
