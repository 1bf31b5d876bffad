package cgroup

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func startWatched(t *testing.T, name string, args ...string) (*exec.Cmd, *ExitWatch) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w := WatchExit(Proc{PID: cmd.Process.Pid, Start: st.Start})
	t.Cleanup(w.Close)
	return cmd, w
}

func waitDone(t *testing.T, w *ExitWatch) {
	t.Helper()
	select {
	case <-w.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the process exited")
	}
}

// Done closes when the process exits, not before; Status reads the exit
// status without reaping: the parent still collects the same one.
func TestWatchExit(t *testing.T) {
	cmd, w := startWatched(t, "sh", "-c", "sleep 0.3; exit 7")
	select {
	case <-w.Done():
		t.Fatal("closed while the process runs")
	case <-time.After(100 * time.Millisecond):
	}
	if _, ok := w.Status(); ok {
		t.Fatal("a status while the process runs")
	}
	waitDone(t, w)
	st, ok := w.Status()
	if !ok || st != 7 {
		t.Fatalf("Status = %d, %v; want 7", st, ok)
	}
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("the parent's wait after Status: %v, %v", err, cmd.ProcessState)
	}
	if _, ok := w.Status(); ok {
		t.Fatal("a status after the process was reaped")
	}

	cmd, w = startWatched(t, "sleep", "5")
	cmd.Process.Signal(syscall.SIGTERM)
	waitDone(t, w)
	if st, ok := w.Status(); !ok || st != 128+15 {
		t.Fatalf("Status of a SIGTERMed process = %d, %v; want 143", st, ok)
	}
	cmd.Wait()
}

// A process already gone, or a pid that names another process now, closes
// Done at once; Close leaves a running process's Done open.
func TestWatchExitGoneAndClose(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	w := WatchExit(Proc{PID: cmd.Process.Pid, Start: 1})
	waitDone(t, w)
	if _, ok := w.Status(); ok {
		t.Fatal("a status for a process never watched")
	}

	sl := exec.Command("sleep", "5")
	if err := sl.Start(); err != nil {
		t.Fatal(err)
	}
	defer sl.Wait()
	defer sl.Process.Kill()
	st, err := ReadStat(sl.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w = WatchExit(Proc{PID: sl.Process.Pid, Start: st.Start + 1})
	waitDone(t, w) // the pid names another process than the one asked for
	w = WatchExit(Proc{PID: sl.Process.Pid, Start: st.Start})
	w.Close()
	sl.Process.Kill()
	select {
	case <-w.Done():
		t.Fatal("closed after Close")
	case <-time.After(200 * time.Millisecond):
	}
}
