package runcfront

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readFifo against a real fifo and a real process's pidfd: it returns
// what the writer wrote once the writer closed the fifo (or left with the
// process), and gives up, with nothing, only when the process is gone and
// no writer came; it never waits on a writer that may never come.
func TestReadFifo(t *testing.T) {
	cases := []struct {
		name      string
		writer    string // sh script run with the fifo as $1; "" for none
		killFirst bool   // the process ends before any writer
		want      string
		ended     bool
	}{
		{name: "written then closed", writer: `printf 0 > "$1"`, want: "0", ended: true},
		{name: "opened and closed unwritten", writer: `: > "$1"`, want: "", ended: true},
		{name: "written and held until the process ends", writer: `exec 3>"$1"; printf 0 >&3; sleep 0.2`, want: "0", ended: true},
		{name: "no writer, the process ends", killFirst: true, ended: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			script := "exec sleep 30"
			if c.writer != "" {
				script = c.writer
			}
			proc, pidfd, fd := fifoInit(t, script)
			if c.killFirst {
				time.AfterFunc(50*time.Millisecond, func() { proc.Process.Kill() })
			}
			type result struct {
				data  []byte
				ended bool
				err   error
			}
			done := make(chan result, 1)
			go func() {
				data, ended, err := readFifo(fd, pidfd, -1)
				done <- result{data, ended, err}
			}()
			select {
			case r := <-done:
				if r.err != nil || string(r.data) != c.want || r.ended != c.ended {
					t.Errorf("readFifo = %q, ended %v, %v; want %q, ended %v", r.data, r.ended, r.err, c.want, c.ended)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("readFifo did not return")
			}
		})
	}
}

// Start leaves to runc a container whose fifo is there but whose init is
// gone, and reads nothing; one without a fifo is not a created container.
func TestStartNotCreated(t *testing.T) {
	dir := t.TempDir()
	if handled, err := Start(context.Background(), dir); handled || err != nil {
		t.Errorf("no fifo: Start = %v, %v", handled, err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, execFifo), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(plainState), 0o600); err != nil {
		t.Fatal(err)
	}
	if handled, err := Start(context.Background(), dir); handled || err != nil {
		t.Errorf("init gone: Start = %v, %v", handled, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, execFifo)); err != nil {
		t.Errorf("the fifo was touched: %v", err)
	}
}

// readFifo gives up, with errCanceled, when its context ends before the
// init wrote anything; once the byte is there, the start has happened and
// an ended context answers it as done, without waiting for the writer's
// close (here held for seconds).
func TestReadFifoCanceled(t *testing.T) {
	for _, written := range []bool{false, true} {
		script := "exec sleep 30" // alive, never a writer
		if written {
			script = `exec 3>"$1"; printf 0 >&3; exec sleep 30`
		}
		_, pidfd, fd := fifoInit(t, script)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if written {
			// The byte is there before the wait begins, and the
			// context has ended by then.
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(pfd, 10_000); n != 1 || err != nil {
				t.Fatalf("the writer did not write: %d, %v", n, err)
			}
			cancel()
		}
		cfd, release, err := cancelFD(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		data, ended, err := readFifo(fd, pidfd, cfd)
		took := time.Since(t0)
		release()
		cancel()
		if took > 5*time.Second {
			t.Errorf("written %v: readFifo returned after %v", written, took)
		}
		if written {
			if err != nil || !ended || string(data) != "0" {
				t.Errorf("written, then canceled: %q, ended %v, %v; want the byte, answered as done", data, ended, err)
			}
		} else if err != errCanceled || ended || len(data) != 0 {
			t.Errorf("never written, canceled: %q, ended %v, %v; want errCanceled", data, ended, err)
		}
	}
}

// fifoInit stands in for a blocked runc init: a fresh exec fifo, a shell
// running script with the fifo as $1, the shell's pidfd and the fifo's
// read end opened as Start opens it (non-blocking). The fds are closed
// and the shell killed when the test ends.
func fifoInit(t *testing.T, script string) (proc *exec.Cmd, pidfd, fd int) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "exec.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	proc = exec.Command("sh", "-c", script, "sh", fifo)
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	go proc.Wait()
	t.Cleanup(func() { proc.Process.Kill() })
	pidfd, err := unix.PidfdOpen(proc.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(pidfd) })
	fd, err = unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return proc, pidfd, fd
}
