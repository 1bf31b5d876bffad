package netpolicy

// The nf_tables probes of Probe, each in a throwaway network namespace.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

// probeNetfilter runs every nf_tables probe in one fresh network namespace
// and destroys it, and returns the socket, NFLOG and table results. Order: a minimal table with `socket cgroupv2` (read back),
// a `log group` rule in it (NFLOG), delete it, then the runtime's own table
// for this contract through Apply (install, conntrack flush, read
// back) and Remove, then a leak check. Nothing outlives the call:
// the namespace has no process and dies with its last fd, taking anything
// left in it along; the tables are still deleted explicitly.
func probeNetfilter(ctx context.Context, n spec.Network, logGroup uint16) (socket, nfLog, table ProbeResult) {
	fd, err := newNetns()
	if err != nil {
		r := ProbeResult{ProbeUnknown, "cannot create a throwaway network namespace: " + err.Error()}
		return r, r, r
	}
	defer unix.Close(fd)

	name := TablePrefix + "probe" + randomHex(3)
	socket = probeSocketExpr(ctx, fd, name)
	if socket.Result == ProbeOK {
		nfLog = probeLogExpr(fd, name, logGroup)
	} else {
		nfLog = ProbeResult{ProbeUnknown, "not probed: the probe table with the socket expression could not be created"}
	}
	if err := deleteProbeTable(fd, name); err != nil {
		socket = ProbeResult{ProbeUnknown, "probe table could not be deleted: " + err.Error()}
	}
	table = probeContractTable(ctx, fd, n, logGroup)
	if left, err := List(ctx, fd); err != nil || len(left) > 0 {
		// The namespace is destroyed below anyway; say so rather than
		// claim a clean probe.
		table = ProbeResult{ProbeUnknown, fmt.Sprintf("leak check after the probes failed (tables %v, err %v); the throwaway namespace is destroyed with them", left, err)}
	}
	return socket, nfLog, table
}

// newNetns returns an fd of a new, empty network namespace (above 2, since
// netlink reads NetNS 0 as "the current namespace"). The unshare runs on a
// locked OS thread that is never unlocked: when its goroutine returns, the
// Go runtime terminates that thread, so no other goroutine ever runs in the
// new namespace.
func newNetns() (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, see above
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{-1, fmt.Errorf("open the new namespace: %w", err)}
			return
		}
		ch <- result{fd, nil}
	}()
	r := <-ch
	if r.err != nil || r.fd > 2 {
		return r.fd, r.err
	}
	hi, err := unix.FcntlInt(uintptr(r.fd), unix.F_DUPFD_CLOEXEC, 3)
	unix.Close(r.fd)
	if err != nil {
		return -1, fmt.Errorf("dup the namespace fd: %w", err)
	}
	return hi, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand contract since Go 1.24)
	return hex.EncodeToString(b)
}

// dialNS opens a conn in the namespace. Each batch gets its own conn:
// google/nftables v0.3.0 keeps a failed batch's error on the Conn.
func dialNS(fd int) (*nftables.Conn, error) {
	return nftables.New(nftables.AsLasting(), nftables.WithNetNSFd(fd))
}

func probeTableRef(name string) *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: name}
}

// probeSocketExpr installs `table inet <name> { set cg { type cgroupsv2 }
// chain output { type filter hook output priority filter; socket cgroupv2
// level 1 @cg counter drop } }` and reads the rule back.
func probeSocketExpr(ctx context.Context, fd int, name string) ProbeResult {
	c, err := dialNS(fd)
	if err != nil {
		return classify("open nf_tables netlink", err)
	}
	defer c.CloseLasting()
	t := c.CreateTable(probeTableRef(name))
	set := &nftables.Set{Table: t, Name: "cg", KeyType: nftables.TypeCGroupV2, KeyByteOrder: binaryutil.NativeEndian}
	if err := c.AddSet(set, []nftables.SetElement{{Key: binaryutil.NativeEndian.PutUint64(1)}}); err != nil {
		return classify("add cgroupsv2 set", err)
	}
	ch := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 1, Register: unix.NFT_REG_1},
		&expr.Lookup{SourceRegister: unix.NFT_REG_1, SetName: set.Name, SetID: set.ID},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := c.Flush(); err != nil {
		return classify("install a table using `socket cgroupv2`", err)
	}
	// Read back raw: google/nftables v0.3.0 drops `socket` on read-back.
	got, err := RuleExprs(ctx, fd, name)
	if err != nil {
		return ProbeResult{ProbeUnknown, "read back the probe rule: " + err.Error()}
	}
	want := CanonExpr(&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 1, Register: unix.NFT_REG_1})
	if len(got) != 1 || !slices.Contains(got[0], want) {
		return ProbeResult{ProbeUnknown, fmt.Sprintf("the kernel accepted the probe rule but read it back as %q, not as one rule with `socket cgroupv2 level 1`", got)}
	}
	return ProbeResult{ProbeOK, "a table matching `socket cgroupv2 level 1` was installed, read back and deleted in a throwaway network namespace"}
}

// probeLogExpr adds `limit rate 20/second log group <group>` to the
// probe table: the kernel checks for an NFLOG (nfnetlink_log) backend when
// the rule is created.
func probeLogExpr(fd int, name string, group uint16) ProbeResult {
	c, err := dialNS(fd)
	if err != nil {
		return classify("open nf_tables netlink", err)
	}
	defer c.CloseLasting()
	t := probeTableRef(name)
	c.AddRule(&nftables.Rule{Table: t, Chain: &nftables.Chain{Name: "output", Table: t}, Exprs: []expr.Any{
		&expr.Limit{Type: expr.LimitTypePkts, Rate: 20, Unit: expr.LimitTimeSecond, Burst: 40},
		&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: group, Data: []byte("gensee probe ")},
	}})
	if err := c.Flush(); err != nil {
		return classify("add a `log group` (NFLOG) rule", err)
	}
	return ProbeResult{ProbeOK, fmt.Sprintf("a rate-limited `log group %d` rule was accepted (NFLOG backend present)", group)}
}

func deleteProbeTable(fd int, name string) error {
	c, err := dialNS(fd)
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	c.DelTable(probeTableRef(name))
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// probeContractTable installs the runtime's own table for this contract's
// network section, as the shim would at Create, reads it back, and removes
// it. The cgroup it is scoped to is a placeholder (id 1, level 1): the
// namespace has no sockets.
func probeContractTable(ctx context.Context, fd int, n spec.Network, logGroup uint16) ProbeResult {
	plan, err := NewPlan("audit"+randomHex(4), n, CgroupRef{Path: "/gensee-audit-probe", ID: 1, Level: 1})
	if err != nil {
		return ProbeResult{ProbeUnknown, "plan the contract's table: " + err.Error()}
	}
	plan.LogGroup = logGroup // as the front doors do with the operator config's log_group
	if err := Apply(ctx, fd, plan); err != nil {
		return classify("install and read back the runtime's table for this contract", err)
	}
	if err := Remove(ctx, fd, plan.Table); err != nil {
		return ProbeResult{ProbeUnknown, "the contract's table installed and read back, but removing it failed: " + err.Error()}
	}
	return ProbeResult{ProbeOK, fmt.Sprintf("the runtime's table for this contract (%d allow tuples) was installed, read back equal to its plan and removed in a throwaway network namespace", len(plan.Allow))}
}

// classify turns a kernel refusal into "missing" (the kernel lacks the
// feature) and anything else into "unknown".
func classify(what string, err error) ProbeResult {
	for _, e := range []error{unix.ENOENT, unix.EOPNOTSUPP, unix.EPROTONOSUPPORT, unix.EAFNOSUPPORT} {
		if errors.Is(err, e) {
			return ProbeResult{ProbeMissing, fmt.Sprintf("%s: the kernel refused it (%v); it needs nf_tables with CONFIG_NFT_SOCKET, NFT_CT, NFT_LOG, NFT_LIMIT, NFT_OBJREF and NETFILTER_NETLINK_LOG", what, err)}
		}
	}
	return ProbeResult{ProbeUnknown, fmt.Sprintf("%s: %v", what, err)}
}
