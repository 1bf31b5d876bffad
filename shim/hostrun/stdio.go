package hostrun

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// stdio is what the command is handed as fds 0-2. A terminal is never
// handed on: the command gets a pipe and gensee relays it, so the command
// cannot type into the caller's terminal (TIOCSTI), take its foreground
// (tcsetpgrp) or stop gensee through it. Files and pipes are handed on as
// they are.
type stdio struct {
	in, out, err *os.File // the command's ends; nil: /dev/null
	childEnds    []*os.File
	parentEnds   []*os.File
	relays       []chan struct{} // closed when an output relay ended
	desc         []string
	// relayIn starts the stdin relay (nil: none). It is started once the
	// stage reports the command's exec (relayInput): nothing is read from
	// the caller's terminal for a run refused or failed before it.
	relayIn func()
}

func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func newStdio(in, out, errf *os.File) (*stdio, error) {
	s := &stdio{in: in, out: out, err: errf}
	if isTerminal(in) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("relay stdin: %w", err)
		}
		s.in, s.childEnds, s.parentEnds = r, append(s.childEnds, r), append(s.parentEnds, w)
		s.relayIn = func() { go func() { io.Copy(w, in); w.Close() }() }
		s.desc = append(s.desc, "stdin: a pipe gensee relayed from the caller's terminal")
	}
	for _, o := range []struct {
		name string
		f    *os.File
		dst  **os.File
	}{{"stdout", out, &s.out}, {"stderr", errf, &s.err}} {
		if !isTerminal(o.f) {
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("relay %s: %w", o.name, err)
		}
		*o.dst, s.childEnds, s.parentEnds = w, append(s.childEnds, w), append(s.parentEnds, r)
		done := make(chan struct{})
		s.relays = append(s.relays, done)
		go func(dst *os.File) { io.Copy(dst, r); close(done) }(o.f)
		s.desc = append(s.desc, o.name+": a pipe gensee relayed to the caller's terminal")
	}
	return s, nil
}

// relayInput starts relaying the caller's terminal to the command's
// stdin, once: when the stage reports the command's exec, so that a run
// refused or failed before it reads nothing of what was typed.
func (s *stdio) relayInput() {
	if s != nil && s.relayIn != nil {
		s.relayIn()
		s.relayIn = nil
	}
}

// started closes the command's ends in gensee: the relays end when the
// command's last copy does.
func (s *stdio) started() {
	for _, f := range s.childEnds {
		f.Close()
	}
	s.childEnds = nil
}

// wait waits up to d for the output relays to drain.
func (s *stdio) wait(d time.Duration) {
	if s == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for _, done := range s.relays {
		select {
		case <-done:
		case <-t.C:
			return
		}
	}
}

// Close releases every pipe end gensee holds.
func (s *stdio) Close() {
	if s == nil {
		return
	}
	s.started()
	for _, f := range s.parentEnds {
		f.Close()
	}
	s.parentEnds = nil
}

// describe says what the command was handed, for the manifest.
func (s *stdio) describe() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.desc)
}
