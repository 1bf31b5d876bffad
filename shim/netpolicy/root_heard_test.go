package netpolicy

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// heard records the sources of the datagrams a root test's receiver gets
// (the far peer D, the world's R). The tests run on the real clock: the
// datagrams cross real namespaces, which no synctest bubble holds.
type heard struct {
	mu   sync.Mutex
	from []string // guarded by mu
}

// listen records every datagram pc receives until cleanup.
func (h *heard) listen(t *testing.T, pc net.PacketConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			a := from.(*net.UDPAddr).AddrPort()
			h.mu.Lock()
			h.from = append(h.from, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()).String())
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
}

// quiet waits a moment and returns (and forgets) the sources heard, for a
// test that wants none. Nothing arriving cannot be waited for, so the
// window is fixed: a loaded machine can make it miss a late datagram, never
// fail a test that should pass.
func (h *heard) quiet() []string {
	time.Sleep(300 * time.Millisecond)
	return h.take()
}

// await waits, at most 5 s, until every source in want was heard, and
// returns (and forgets) the sources heard: a test that wants them does not
// fail because a loaded machine delivered them late.
func (h *heard) await(want ...string) []string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		h.mu.Lock()
		all := !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(h.from, w) })
		h.mu.Unlock()
		if all {
			break
		}
	}
	return h.take()
}

func (h *heard) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.from
	h.from = nil
	return got
}
