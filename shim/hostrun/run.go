package hostrun

import (
	"context"
	"os"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Request is one `gensee boundary run`.
type Request struct {
	Config      config.Config
	Catalog     string // --catalog; "" means the operator config's
	Observation []byte // --observation's contents; empty: no preflight
	Inference   []byte // --inference's contents; empty: the safe default, if any
	Workspace   string
	Args, Env   []string // argv; --env K=V
	User        Identity
	// Self, when set, is the binary the wrapper runs as; "" means
	// gensee-sandbox beside gensee when installed, else gensee itself
	// (openSandbox).
	Self string
	// Stdin, Stdout and Stderr are handed to the command as they are.
	Stdin, Stdout, Stderr *os.File
	// Grace is how long a forwarded SIGINT/SIGTERM has before the cgroup
	// is killed (0: 10s).
	Grace time.Duration
}

// Result is a run whose command started.
type Result struct {
	OperationID string
	Manifest    *spec.Manifest
	ManifestRaw []byte // as written to the record
	// Status is the command's own exit status (128+n when a signal n
	// ended it).
	Status int
}

// run is one host run in progress.
type run struct {
	req      Request
	id       string
	store    record.Store
	cmd      Command
	contract spec.Contract
	adm      *spec.Admission
	log      *log.Entry
	ws       *Workspace // the workspace directory admission checked
	phases   *phases
}

// Run executes req's command under the boundary. A *Refusal means it was
// refused before the command started, and nothing of it is left; any other
// error is a failure of the runtime.
func Run(ctx context.Context, req Request) (*Result, error) {
	ctx = context.WithoutCancel(ctx) // signals are forwarded, never abort the exit path
	if os.Geteuid() != 0 {
		return nil, refuse(ReasonNotRoot, "uid", "run it with sudo: the boundary (cgroup, nftables, mounts) needs root; the command itself runs as you", "gensee boundary run needs root")
	}
	ph := newPhases()
	// The sockets that delete tables (the run's, an orphan's) are handed
	// to a process that outlives this one (handOff).
	netpolicy.HoldReleases()
	defer req.handOff()
	st := record.Store{Dir: req.Config.StateDir}
	if _, err := CleanOrphans(ctx, req.Config.StateDir); err != nil {
		log.G(ctx).WithError(err).Warn("remove leftovers of dead host runs")
	}
	cmd, rf := NewCommand(req.Args, req.Env, req.Workspace, req.User)
	if rf != nil {
		return nil, refused(ctx, st, req.User, rf)
	}
	if cmd.User.UID == 0 {
		return nil, refused(ctx, st, req.User, refuse(ReasonUser, "user", "run it through sudo from the account the command should run as", "uid 0 never runs a host command: it would own root's files"))
	}
	wsDir, rf := CheckWorkspace(cmd.Workspace, cmd.User)
	if rf != nil {
		return nil, refused(ctx, st, req.User, rf)
	}
	defer wsDir.Close()
	ph.mark("checks")
	exe, obs, rf := observeCommand(cmd)
	if rf != nil {
		return nil, refused(ctx, st, req.User, rf)
	}
	defer exe.Close()
	ph.mark("observe")
	r := &run{req: req, store: st, cmd: cmd, ws: wsDir, phases: ph}
	// The wrapper starts beside the decision (startEarly): it only waits
	// for its spec until the admission is made and recorded.
	sp, err := r.startEarly(ctx, exe)
	if err != nil {
		return nil, err
	}
	adm, rf := admit(ctx, req, cmd, obs, exe)
	if rf != nil {
		sp.cancel(ctx, r)
		return nil, refused(ctx, st, req.User, rf)
	}
	ph.mark("admission")
	r.adm, r.contract = adm, adm.Contract
	return r.execute(ctx, exe, sp)
}

// observeCommand resolves argv[0], seals a copy of it (and of a script's
// interpreter), hashes the copy and derives the observation.
func observeCommand(cmd Command) (*sealedCommand, spec.Observation, *Refusal) {
	f, path, err := observe.ResolveHost(cmd.Args[0], cmd.Cwd, cmd.Env)
	if err != nil {
		return nil, spec.Observation{}, refuse(ReasonCommand, "argv[0]", "name an executable on PATH "+FixedPath+" (the run's fixed PATH) or by its path", "%v", err)
	}
	exe, err := sealCommand(f, path, cmd.Env)
	f.Close()
	if err != nil {
		return nil, spec.Observation{}, refuse(ReasonCommand, "argv[0]", "", "%v", err)
	}
	obs, err := observe.HostObservation(cmd.User.UID, cmd.User.GID, exe.Exe.SHA256, cmd.Args, cmd.Env, cmd.Cwd)
	if err != nil {
		exe.Close()
		return nil, spec.Observation{}, refuse(ReasonCommand, "argv", "", "%v", err)
	}
	return exe, obs, nil
}

// admit loads the trust inputs and decides, exactly as for a container:
// without --inference, the selector's node analyzer is asked.
func admit(ctx context.Context, req Request, cmd Command, obs spec.Observation, exe *sealedCommand) (*spec.Admission, *Refusal) {
	catPath, field := req.Catalog, "--catalog"
	if catPath == "" {
		catPath, field = req.Config.Catalog, "catalog"
	}
	now := time.Now()
	cat, rf := engine.LoadTrust(req.Config, catPath, field, now)
	if rf != nil {
		return nil, named(rf, "")
	}
	rec, rf := engine.Decide(cat, admission.Input{Facts: admission.Facts{Runtime: Runtime, User: cmd.User.Fact()},
		InferenceEnvelope: req.Inference, PreflightObservation: req.Observation, Observation: obs, Now: now,
		// what observeCommand digested (observe.HostObservation)
		Command: spec.Command{Args: cmd.Args, Env: cmd.Env, Cwd: cmd.Cwd},
		Ask:     engine.Asker(ctx, spec.DoorHost, record.Store{Dir: req.Config.StateDir}, "")})
	if rf != nil {
		return nil, named(rf, fieldOf(admission.Reason(rf.Reason), len(req.Inference) > 0))
	}
	uid := cmd.User.UID
	var interp *spec.HostFile
	if exe.Interp != nil {
		interp = &spec.HostFile{Path: exe.Interp.Path, SHA256: exe.Interp.SHA256}
	}
	return &spec.Admission{
		Namespace: Namespace, CreatedAt: now.UTC(),
		Facts:             spec.AdmissionFacts{Runtime: Runtime, User: cmd.User.Name, UID: &uid},
		AdmissionDecision: rec,
		Command:           &spec.AdmittedCommand{Args: cmd.Args, Env: cmd.Env, Cwd: cmd.Cwd, Executable: exe.Exe.Path, Workspace: cmd.Workspace, Interpreter: interp},
		Netns:             spec.NetnsHost, Deadline: rec.Contract.Deadline,
	}, nil
}

// fieldOf names the input an admission reason is about; attached says
// whether the caller gave --inference (else an inference's failure is the
// selector's analyzer's answer).
func fieldOf(r admission.Reason, attached bool) string {
	switch r {
	case admission.ReasonAnalyzerUnavailable, admission.ReasonAnalyzerNoClass:
		return "analyzer"
	case admission.ReasonPreflightMismatch:
		return "--observation"
	case admission.ReasonNoSelector, admission.ReasonAmbiguousSelector:
		return "facts (runtime host, user)"
	case admission.ReasonNoCatalog, admission.ReasonCatalogExpired:
		return "--catalog"
	case admission.ReasonObservationInvalid:
		return "argv"
	}
	if !attached && r != admission.ReasonNoInference {
		return "analyzer"
	}
	return "--inference"
}

// refused keeps a refusal in the refusals log (with the admission_denied
// event's fields) and returns it.
func refused(ctx context.Context, st record.Store, id Identity, rf *Refusal) *Refusal {
	log.G(ctx).WithField("reason", rf.Reason).WithField("field", rf.Field).Debug(rf.Error()) // the front door prints it
	if st.Dir == "" || rf.Reason == ReasonNotRoot {
		return rf
	}
	rec := rf.Record(time.Now())
	uid := id.UID
	rec.Namespace, rec.Runtime, rec.UID, rec.User = Namespace, Runtime, &uid, id.Name
	if err := st.AppendRefusal(rec); err != nil {
		log.G(ctx).WithError(err).Error("record refusal")
	}
	return rf
}

// Observe computes the observation Run re-derives for cmd, ahead of time
// (gensee observe -- CMD), and the path argv[0] resolved to.
func Observe(cmd Command) (spec.Observation, string, *Refusal) {
	ws, rf := CheckWorkspace(cmd.Workspace, cmd.User)
	if rf != nil {
		return spec.Observation{}, "", rf
	}
	ws.Close()
	exe, obs, rf := observeCommand(cmd)
	if rf != nil {
		return spec.Observation{}, "", rf
	}
	exe.Close()
	return obs, exe.Exe.Path, nil
}
