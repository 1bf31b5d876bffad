package cgroup

import (
	"os/exec"
	"testing"
	"time"
)

// Exited closes its channel when the process exits, not before, and
// reaps nothing: the parent still collects the exit status.
func TestExited(t *testing.T) {
	cmd := exec.Command("sleep", "0.3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ch, stop := Exited(Proc{PID: cmd.Process.Pid, Start: st.Start})
	defer stop()
	select {
	case <-ch:
		t.Fatal("closed while the process runs")
	case <-time.After(100 * time.Millisecond):
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("not closed after the process exited")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the parent's wait after Exited: %v", err)
	}
	if cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit status %d, want 0", cmd.ProcessState.ExitCode())
	}
}

// A process already gone, or a pid that names another process now, closes
// the channel at once; stop leaves a running process's channel open.
func TestExitedGoneAndStop(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	ch, stop := Exited(Proc{PID: cmd.Process.Pid, Start: 1})
	stop()
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("a reaped process's channel stays open")
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
	ch, stop = Exited(Proc{PID: sl.Process.Pid, Start: st.Start + 1})
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("a pid naming another process (start time differs) stays open")
	}
	stop()
	ch, stop = Exited(Proc{PID: sl.Process.Pid, Start: st.Start})
	stop()
	sl.Process.Kill()
	select {
	case <-ch:
		t.Fatal("closed after stop")
	case <-time.After(200 * time.Millisecond):
	}
}
