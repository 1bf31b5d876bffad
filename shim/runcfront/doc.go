// Package runcfront is the program the gensee shim hands containerd's runc
// task service as its runc binary (gensee-runc) once runc has created the
// task: the task's runc is a link in its bundle, to the real runc for the
// create, then to the front (the shim's runcLink). It answers the two runc
// calls of every task whose answer needs none of runc, and hands every
// other call to the real runc by exec, unchanged:
//
//   - `start ID` of a created container: runc's own start opens the
//     container's exec fifo (<root>/<id>/exec.fifo), reads the byte the
//     blocked `runc init` writes, and removes the fifo (libcontainer's
//     Container.exec; poststart hooks run at create since runc 1.2). The
//     front does exactly that, beside a pidfd on the init so an init that
//     dies first is seen, as runc's poll of its stat is.
//   - `delete ID` of a stopped container: runc's destroy removes each
//     cgroup path recorded in state.json and the state directory. The
//     front does that for the plain case only: the init gone (its pid's
//     start time differs, or it is a zombie), its own pid namespace (the
//     kernel ended every other process with it), no poststop hook, no
//     Intel RDT group, no systemd cgroup driver, no frozen cgroup, and
//     every cgroup path under /sys/fs/cgroup removable with one rmdir.
//
// Each of those runc calls is a whole runc process: a 13 MB Go binary
// linked against libseccomp, about 8 ms of start-up on the VMs this
// runs on, twice per container. The front links the standard library
// and x/sys only. The shim does not even run the front for those two:
// its go-runc monitor answers them with Serve, this package's code, in
// the shim's process (service.frontMonitor), and runs the front only for
// the calls Serve hands on.
//
// Anything else, and every case above the front cannot judge (no state,
// a fifo that is not a fifo, an init still alive at delete, any flag it
// does not know), goes to the real runc, which gives its own answer and
// its own error text. The real runc is the one the shim admitted (the
// operator's BinaryName, probed for seccomp): the shim writes its path in
// the bundle (RuncFile) before runc is first run, and the front reads it
// from the bundle go-runc names in --log. It must never run a runc
// anyone but the shim's owner could name, and never remove a state
// directory or cgroup of a container whose init may still run.
package runcfront
