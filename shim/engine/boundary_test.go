package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/telemetry"
	"github.com/gensee/gensee/spec"
)

// steps is the order Bind's fakes were called in.
type steps struct{ list []string }

func (s *steps) add(x string) { s.list = append(s.list, x) }

// fakeBind replaces Bind's kernel-facing steps with fakes that record
// their order; apply returns applyErr.
func fakeBind(t *testing.T, c *steps, applyErr error) {
	savedOpen, savedReader, savedApply := openMonitor, openReader, applyTable
	t.Cleanup(func() { openMonitor, openReader, applyTable = savedOpen, savedReader, savedApply })
	openMonitor = func(cfg telemetry.Config, p *netpolicy.Plan) (*telemetry.Monitor, error) {
		c.add("monitor.open " + cfg.DenyRule)
		return &telemetry.Monitor{}, nil
	}
	openReader = func(_ *telemetry.Monitor, _ int, _ *netpolicy.Plan, shared bool) {
		if shared {
			c.add("reader.open shared")
		} else {
			c.add("reader.open private")
		}
	}
	applyTable = func(_ context.Context, _ int, p *netpolicy.Plan, _ func()) (netpolicy.Matched, error) {
		c.add("table.apply " + p.Table)
		return netpolicy.Matched{}, applyErr
	}
}

func bindSpec(t *testing.T, c *steps, markErr error) BindSpec {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	return BindSpec{OperationID: "0123456789abcdef0123456789abcdef", Network: spec.Network{Mode: spec.NetworkDenyAll},
		Cgroup: netpolicy.CgroupRef{ID: 7, Level: 2, Path: "/gensee/x"}, Netns: f, LogGroup: 77,
		Monitor: telemetry.Config{Store: record.Store{Dir: t.TempDir()}, Logger: log.L},
		Mark: func(table string) error {
			c.add("mark " + table)
			return markErr
		}}
}

// Bind marks the table before it exists and opens the deny-log reader
// before installing it, in every door; the plan follows the netns kind
// and the operator's log group.
func TestBindOrder(t *testing.T) {
	for _, kind := range []spec.NetnsKind{spec.NetnsPrivate, spec.NetnsHost, spec.NetnsPath} {
		c := &steps{}
		fakeBind(t, c, nil)
		b := NewBoundary(kind, log.L)
		plan, err := b.Bind(context.Background(), bindSpec(t, c, nil))
		if err != nil {
			t.Fatal(err)
		}
		reader := "reader.open shared"
		scope := netpolicy.ScopeCgroup
		if kind == spec.NetnsPrivate {
			reader, scope = "reader.open private", netpolicy.ScopeNetns
		}
		want := []string{"monitor.open " + spec.NetworkDenyAll, "mark " + plan.Table, reader, "table.apply " + plan.Table}
		if got := c.list; !slices.Equal(got, want) {
			t.Fatalf("%s: steps %v, want %v", kind, got, want)
		}
		if plan.Scope != scope || plan.LogGroup != 77 {
			t.Fatalf("%s: plan scope %v log group %d", kind, plan.Scope, plan.LogGroup)
		}
	}
}

// A marker that cannot be written refuses the bind before any table; an
// install that fails leaves the boundary holding what it took, which
// Close releases.
func TestBindFailures(t *testing.T) {
	c := &steps{}
	fakeBind(t, c, nil)
	b := NewBoundary(spec.NetnsHost, log.L)
	if _, err := b.Bind(context.Background(), bindSpec(t, c, errors.New("read-only bundle"))); err == nil {
		t.Fatal("an unwritable marker bound")
	}
	for _, s := range c.list {
		if len(s) > 11 && s[:11] == "table.apply" {
			t.Fatalf("a table was installed with no marker: %v", c.list)
		}
	}
	if b.Remove(context.Background()) != spec.TableWithNetns {
		t.Fatal("the netns handle was not released")
	}

	c = &steps{}
	boom := errors.New("read back differs")
	fakeBind(t, c, boom)
	b = NewBoundary(spec.NetnsPrivate, log.L)
	if _, err := b.Bind(context.Background(), bindSpec(t, c, nil)); !errors.Is(err, boom) {
		t.Fatalf("bind: %v", err)
	}
	if b.Remove(context.Background()) != spec.TableWithNetns {
		t.Fatal("a private netns's table goes with its handle")
	}
}

// TestBindOwn: Own binds the caller's own shared netns without a setns
// per socket (the fd the kernel steps get is -1); Own for a private kind,
// or for a netns that is not this thread's, is refused before any step.
func TestBindOwn(t *testing.T) {
	c := &steps{}
	fakeBind(t, c, nil)
	var gotFD atomic.Int64
	applyTable = func(_ context.Context, fd int, p *netpolicy.Plan, _ func()) (netpolicy.Matched, error) {
		gotFD.Store(int64(fd))
		return netpolicy.Matched{}, nil
	}
	own := func() *os.File {
		f, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			t.Skip(err)
		}
		return f
	}
	bs := bindSpec(t, c, nil)
	bs.Netns, bs.Own = own(), true
	if _, err := NewBoundary(spec.NetnsHost, log.L).Bind(context.Background(), bs); err != nil || gotFD.Load() != -1 {
		t.Fatalf("own host netns: %v, fd %d", err, gotFD.Load())
	}
	c.list = nil
	bs = bindSpec(t, c, nil)
	bs.Netns, bs.Own = own(), true
	if _, err := NewBoundary(spec.NetnsPrivate, log.L).Bind(context.Background(), bs); err == nil || len(c.list) != 0 {
		t.Fatalf("Own with a private netns: %v, steps %v", err, c.list)
	}
	bs = bindSpec(t, c, nil) // /dev/null: no netns at all
	bs.Own = true
	if _, err := NewBoundary(spec.NetnsHost, log.L).Bind(context.Background(), bs); err == nil || len(c.list) != 0 {
		t.Fatalf("Own with another file: %v, steps %v", err, c.list)
	}
}

// The exit path is armed before the sensors start (a door's start): its
// drain, its stop of the sensors and a monitor close (a shutdown racing
// the start) wait until they have, and a boundary whose sensors were never
// due waits for nothing.
func TestSensorsBeforeDrain(t *testing.T) {
	never := NewBoundary(spec.NetnsPrivate, log.L)
	never.StopSensors()
	never.DrainSteps()
	never.CloseMonitor()

	synctest.Test(t, func(t *testing.T) {
		b := NewBoundary(spec.NetnsPrivate, log.L)
		started := b.SensorsDue()
		var up atomic.Bool
		done := make(chan string, 3)
		go func() { b.DrainSteps(); done <- fmt.Sprint("drain after start: ", up.Load()) }()
		go func() { b.StopSensors(); done <- fmt.Sprint("stop after start: ", up.Load()) }()
		go func() { b.CloseMonitor(); done <- fmt.Sprint("close after start: ", up.Load()) }()
		synctest.Wait()
		select {
		case got := <-done:
			t.Fatalf("%s: returned before the sensors started", got)
		default:
		}
		up.Store(true)
		b.StartSensors(nil)
		started()
		started() // once only
		for range 3 {
			if got := <-done; !strings.HasSuffix(got, "true") {
				t.Fatal(got)
			}
		}
	})
}
