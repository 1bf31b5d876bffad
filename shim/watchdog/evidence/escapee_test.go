package evidence

import (
	"net"
	"os"
	"slices"
	"testing"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
)

func TestParseProcNet(t *testing.T) {
	tcp := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A2C4 020200C0:1F91 01 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:A2C6 020200C0:1F92 06 00000000:00000000 03:00000F8D 00000000     0        0 0 3 0000000000000000
`)
	got := parseProcNet(tcp, netpolicy.ProtoTCP)
	if len(got) != 1 || got[0].inode != 2222 || got[0].target.String() != "192.0.2.2:8081/tcp" {
		t.Fatalf("tcp: %+v", got)
	}
	udp6 := []byte(`  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  5: 00000000000000000000000001000000:E1A3 B80D0120000000000000000002000000:14E9 01 00000000:00000000 00:00000000 00000000     0        0 3333 2 0000000000000000 0
  6: 00000000000000000000000000000000:14E9 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4444 2 0000000000000000 0
`)
	got = parseProcNet(udp6, netpolicy.ProtoUDP)
	if len(got) != 1 || got[0].inode != 3333 || got[0].target.String() != "[2001:db8::2]:5353/udp" {
		t.Fatalf("udp6: %+v", got)
	}
}

// TestEscapeeConns: this very process, taken as an escapee, holds a TCP
// connection over loopback: its peer is found through its own sockets.
func TestEscapeeConns(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := cgroup.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, sc := range escapeeConns(cgroup.Proc{PID: os.Getpid(), Start: st.Start}) {
		targets = append(targets, sc.target.String())
	}
	want := ln.Addr().String() + "/tcp"
	if !slices.Contains(targets, want) {
		t.Fatalf("connections %q lack %s", targets, want)
	}
	if got := escapeeConns(cgroup.Proc{PID: os.Getpid(), Start: st.Start + 1}); got != nil {
		t.Errorf("another start time (a reused pid): %+v", got)
	}
}
