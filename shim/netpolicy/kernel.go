package netpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// errNoTable means the table is not in the namespace.
var errNoTable = errors.New("table not found")

// kernel is the seam between the pure plan/ruleset code and nftables in one
// network namespace. netlinkKernel is the only implementation that touches
// the kernel; unit tests substitute a fake.
type kernel interface {
	// install sends the whole table in one netlink batch; the kernel
	// applies all of it or none. It fails if the table already exists.
	install(rs *ruleset) error
	// dump reads the table back, or returns errNoTable.
	dump(table string) (*ruleset, error)
	// dumpCounters reads only what holds counters: the elements of the
	// used sets named, then the counter objects (ReadCounters, on the
	// exit path), or returns errNoTable.
	dumpCounters(table string, sets []string) (*ruleset, error)
	// remove deletes the table; an absent table is not an error.
	remove(table string) error
}

// netlinkKernel talks nftables netlink in the namespace netnsFD refers to
// (netnsFD < 0: the caller's own namespace). Each call dials its own socket:
// google/nftables v0.3.0 keeps a failed batch's error on the Conn forever,
// so a Conn that failed once is never reused (upstream #323).
type netlinkKernel struct {
	netnsFD int
}

func newNetlinkKernel(netnsFD int) (*netlinkKernel, error) {
	if netnsFD == 0 {
		// mdlayher/netlink reads NetNS 0 as "the current namespace": a
		// namespace fd that happens to be 0 would silently become the
		// host's. Refuse rather than guess.
		return nil, errors.New("network namespace fd 0 is ambiguous (0 means the current namespace to netlink): dup the fd above 2 or pass -1 for the current namespace")
	}
	return &netlinkKernel{netnsFD: netnsFD}, nil
}

// dial opens a lasting nftables conn in the namespace, for what is not the
// install batch (batch.go).
func (k *netlinkKernel) dial(more ...nftables.ConnOption) (*nftables.Conn, error) {
	opts := append([]nftables.ConnOption{nftables.AsLasting()}, more...)
	if k.netnsFD > 0 {
		opts = append(opts, nftables.WithNetNSFd(k.netnsFD))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("open nftables netlink socket: %w", err)
	}
	return c, nil
}

// forceSndbuf raises the send buffer past net.core.wmem_max: the whole batch
// goes out in one sendmsg, which netlink refuses (EMSGSIZE) when larger than
// the buffer — about 200 KiB by default, i.e. ~8,000 IPv4 tuples. nft(8) does
// the same. v0.3.0 does not size it (fixed upstream in #312).
func forceSndbuf(c *netlink.Conn, n int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("set netlink send buffer to %d bytes (SO_SNDBUFFORCE, needs CAP_NET_ADMIN): %w", n, serr)
	}
	return nil
}

// maxElemsPerMsg bounds the elements in one NEWSETELEM message: the element
// list is one netlink attribute whose length is a u16, which neither
// mdlayher/netlink (upstream #303) nor batchBuf checks. 1024 IPv6 tuples
// take about 37 KiB.
const maxElemsPerMsg = 1024

// batchBytes estimates the batch size, to allocate its buffer once: per
// element a list entry, a key and its data attribute headers plus the key,
// and headroom for everything else.
func batchBytes(rs *ruleset) int {
	n := 64 << 10
	for _, s := range rs.sets {
		n += len(s.elems) * (12 + int(s.set.KeyType.Bytes) + 4)
	}
	return n
}

func (k *netlinkKernel) install(rs *ruleset) error {
	batch, err := installBatch(rs)
	if err != nil {
		return err
	}
	nl, err := k.rawConn()
	if err != nil {
		return err
	}
	defer nl.Close()
	if err := forceSndbuf(nl.c, len(batch.b)); err != nil {
		return err
	}
	// A refused message's error need not echo it back (up to 40 KiB of
	// elements each).
	if err := nl.c.SetOption(netlink.CapAcknowledge, true); err != nil {
		return fmt.Errorf("set netlink option: %w", err)
	}
	if err := sendBatch(nl, batch); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("table inet %s already exists: another operation with the same id prefix or a leftover; remove it (gensee cleanup, or nft delete table inet %s) if no task uses it: %w", rs.table.Name, rs.table.Name, err)
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("kernel refused the ruleset (missing nf_tables feature? needs CONFIG_NFT_SOCKET, NFT_CT, NFT_LOG, NFT_LIMIT, NFT_OBJREF and NETFILTER_NETLINK_LOG): %w", err)
		}
		return err
	}
	return nil
}

func (k *netlinkKernel) remove(table string) error {
	var nl *netlink.Conn
	c, err := k.dial(nftables.WithSockOptions(func(c *netlink.Conn) error { nl = c; return nil }))
	if err != nil {
		return err
	}
	// Closing the socket waits until nf_tables has freed what the
	// deletion released (linger.go): it is held for a process that
	// outlives the caller, or closed beside the caller's next steps.
	defer func() {
		if keep(nl) {
			c.CloseLasting()
			return
		}
		go c.CloseLasting()
	}()
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: table})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// tables lists the inet tables whose names start with TablePrefix.
func (k *netlinkKernel) tables() ([]string, error) {
	c, err := k.dial()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range ts {
		if strings.HasPrefix(t.Name, TablePrefix) {
			names = append(names, t.Name)
		}
	}
	return names, nil
}

func (k *netlinkKernel) dump(table string) (*ruleset, error) {
	nl, err := k.rawConn()
	if err != nil {
		return nil, err
	}
	defer nl.Close()
	// The generation before and after the dump: the same, and no commit
	// moved it while it read (what that proves, gen.go says). Not knowing
	// it only costs the watcher a read-back it could have skipped.
	before, genErr := readGen(nl)
	c, err := k.dial()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	rs, sets, err := dumpTable(c, table)
	if err != nil {
		return nil, err
	}
	// The elements, most of a large table's bytes and of its decoding,
	// on a socket of their own while this one reads the rest: each dump
	// is consistent on its own (NLM_F_DUMP_INTR), and the generation
	// read before and after brackets both.
	elemsDone := make(chan error, 1)
	go func() { elemsDone <- k.dumpSets(table, sets, rs) }()
	exprs, err := dumpSetExprs(nl, table)
	if err == nil {
		rs.rules, err = dumpRules(nl, table)
	}
	if err == nil {
		rs.counters, err = dumpCounterObjs(c, rs.table)
	}
	if eerr := <-elemsDone; err == nil {
		err = eerr
	}
	if err != nil {
		return nil, err
	}
	for _, s := range rs.sets {
		s.exprs = exprs[s.set.Name]
	}
	if after, err := readGen(nl); genErr == nil && err == nil && after == before {
		rs.gen, rs.genOK = before, true
	}
	return rs, nil
}

// dumpTable reads table's declaration, its chains and its sets'
// declarations, or returns errNoTable.
func dumpTable(c *nftables.Conn, table string) (*ruleset, []*nftables.Set, error) {
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, nil, fmt.Errorf("list tables: %w", err)
	}
	rs := &ruleset{}
	for _, t := range ts {
		if t.Name == table {
			rs.table = t
		}
	}
	if rs.table == nil {
		return nil, nil, errNoTable
	}
	// v0.3.0 decodes NFTA_TABLE_FLAGS (big endian on the wire) in host
	// order: undo that so a dormant table reads as flag 1.
	var raw [4]byte
	binary.NativeEndian.PutUint32(raw[:], rs.table.Flags)
	rs.table.Flags = binary.BigEndian.Uint32(raw[:])
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, nil, fmt.Errorf("list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == table {
			rs.chains = append(rs.chains, ch)
		}
	}
	sets, err := c.GetSets(rs.table)
	if err != nil {
		return nil, nil, fmt.Errorf("list sets: %w", err)
	}
	return rs, sets, nil
}

// dumpSets reads the elements of sets into rs.sets, on a socket of its
// own.
func (k *netlinkKernel) dumpSets(table string, sets []*nftables.Set, rs *ruleset) error {
	nl, err := k.rawConn()
	if err != nil {
		return err
	}
	defer nl.Close()
	for _, s := range sets {
		// A used set holds what the rules added; the planned size is
		// what the membership sets hold.
		hint := int(s.Size)
		if s.Dynamic {
			hint = 0
		}
		elems, odd, err := dumpElems(nl, table, s.Name, hint)
		if err != nil {
			return err
		}
		rs.sets = append(rs.sets, &setElems{set: s, elems: elems, odd: odd})
	}
	return nil
}

// dumpCounterObjs reads table's stateful objects, all counters.
func dumpCounterObjs(c *nftables.Conn, table *nftables.Table) ([]*nftables.CounterObj, error) {
	objs, err := c.GetObjects(table)
	if err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	return counterObjs(objs, table.Name)
}

// dumpCounters reads the elements of sets (their per-element counters),
// then the table's counter objects (one NFT_MSG_GETOBJ dump), nothing
// else. In that order: a packet counted while they are read is in the
// objects if it is in an element, so an element's count never exceeds
// the object that counted the same packets (countersOf checks).
func (k *netlinkKernel) dumpCounters(table string, sets []string) (*ruleset, error) {
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: table}
	rs := &ruleset{table: t}
	var missing []string
	if len(sets) > 0 {
		nl, err := k.rawConn()
		if err != nil {
			return nil, err
		}
		defer nl.Close()
		for _, s := range sets {
			elems, _, err := dumpElems(nl, table, s, 0)
			if errors.Is(err, unix.ENOENT) {
				// The table, or only the set: the objects' read
				// below tells which.
				missing = append(missing, s)
				continue
			}
			if err != nil {
				return nil, err
			}
			rs.sets = append(rs.sets, &setElems{set: &nftables.Set{Table: t, Name: s}, elems: elems})
		}
	}
	c, err := k.dial()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	objs, err := c.GetObjects(t)
	if errors.Is(err, unix.ENOENT) {
		return nil, errNoTable
	}
	if err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	if rs.counters, err = counterObjs(objs, table); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("table %s lacks its sets %v", table, missing)
	}
	return rs, nil
}

// counterObjs are the stateful objects of table as counters: a gensee
// table holds no other kind.
func counterObjs(objs []nftables.Obj, table string) ([]*nftables.CounterObj, error) {
	var out []*nftables.CounterObj
	for _, o := range objs {
		co, ok := o.(*nftables.CounterObj)
		if !ok {
			return nil, fmt.Errorf("unexpected stateful object %T in table %s", o, table)
		}
		out = append(out, co)
	}
	return out, nil
}

// rawConn opens a plain nf_tables netlink socket in the namespace, for the
// dumps this package decodes itself.
func (k *netlinkKernel) rawConn() (*dumpConn, error) {
	cfg := &netlink.Config{}
	if k.netnsFD > 0 {
		cfg.NetNS = k.netnsFD
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	return &dumpConn{c: c}, nil
}

// SameNetns reports whether fd refers to the calling thread's own network
// namespace.
func SameNetns(fd int) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return false, fmt.Errorf("stat netns fd %d: %w", fd, err)
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &b); err != nil {
		if err := unix.Stat("/proc/self/ns/net", &b); err != nil {
			return false, fmt.Errorf("stat own netns: %w", err)
		}
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}
