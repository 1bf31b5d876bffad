package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gensee/gensee/internal/asuser"
	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/hostrun"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// What the caller of boundary run may choose. gensee runs as root for a
// user (sudo): that user must not pick the operator's trust inputs, nor
// have root read or write a file for them.
//
//   - Invoked by anyone but root, the operator config is the default
//     (config.DefaultPath): --config, `gensee --config` and $GENSEE_CONFIG
//     (sudo's env_keep, doas' keepenv) are refused unless they name it, and
//     --catalog unless it names the config's catalog.
//   - --observation, --inference and --catalog are opened as the invoking
//     user (asuser: fsuid, fsgid and groups of that user on the opening
//     thread; no symlink at the last component, a regular file, bounded).
//     --manifest is written as that user, in place.
//   - No error repeats what such a file holds: read failures name the path
//     and errno, and an admission refusal whose message quotes the
//     unverified document is replaced by a generic one (the full message
//     stays in the refusals log, which only root reads).
//
// A root-invoked run takes the same code path with root's credentials.

// checkCallerConfig refuses an operator config or catalog the invoking
// user chose.
func (o *runOptions) checkCallerConfig(env *Env, invoking hostrun.Identity) error {
	if invoking.UID == 0 {
		return nil
	}
	flagValue := o.config
	field := "--config"
	if flagValue == "" {
		flagValue = env.globals().config
	}
	if flagValue == "" {
		field = "$" + config.EnvConfig
	}
	path, explicit, err := ConfigPath(flagValue, env.Getenv)
	if err == nil && (!explicit || path == config.DefaultPath) {
		return nil
	}
	return refusedRun(&spec.Refusal{Reason: hostrun.ReasonOperatorConfig, Field: field,
		Message: fmt.Sprintf("%s: invoked by uid %d, boundary run reads only the operator config %s", field, invoking.UID, config.DefaultPath),
		Fix:     fmt.Sprintf("drop --config and unset %s (and keep it out of sudo's env_keep); the operator sets the trust anchor and state dir in %s", config.EnvConfig, config.DefaultPath)})
}

// checkCallerCatalog refuses a --catalog other than the config's when the
// invoking user is not root.
func (o *runOptions) checkCallerCatalog(invoking hostrun.Identity, cfg config.Config) error {
	if invoking.UID == 0 || o.catalog == "" {
		return nil
	}
	if abs, err := filepath.Abs(o.catalog); err == nil && abs == filepath.Clean(cfg.Catalog) {
		return nil
	}
	return refusedRun(&spec.Refusal{Reason: hostrun.ReasonCatalog, Field: "--catalog",
		Message: fmt.Sprintf("--catalog: invoked by uid %d, boundary run reads only the operator config's catalog %s", invoking.UID, cfg.Catalog),
		Fix:     "drop --catalog; the operator installs the signed catalog there"})
}

// readAs reads the file a flag names as the invoking user (stdin for "-",
// which is theirs already), at most max bytes.
func (e *Env) readAs(c asuser.Creds, what, path string, max int) ([]byte, error) {
	if path == stdio {
		return e.readInput(path, max)
	}
	data, err := asuser.ReadFile(c, path, int64(max))
	if err == nil {
		return data, nil
	}
	var odd *fsafe.NotRegularError
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fail(ExitRunRefused, "read "+what+" "+path, errors.New("is a symlink"), "name the file itself")
	case errors.As(err, &odd):
		return nil, fail(ExitRunRefused, "read "+what+" "+path, fmt.Errorf("is a %s, not a regular file", fsafe.Kind(odd.Mode)), "name a regular file")
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return nil, fail(ExitRunRefused, "read "+what+" "+path, unwrapPath(err),
			fmt.Sprintf("it is opened as the invoking user (uid %d): name a file that account can read", c.UID))
	case errors.Is(err, asuser.ErrCreds):
		return nil, fail(ExitRunRefused, "read "+what+" "+path, err, "")
	}
	return nil, refusedRun(readErr(what, path, err)) // fsafe's and the kernel's words: sizes and errnos, never content
}

// writeManifest copies the manifest to --manifest as the invoking user,
// or to stdout for "-" (after the command ended and its cgroup was
// drained: nothing of the command writes to stdout any more).
func (e *Env) writeManifest(c asuser.Creds, path string, data []byte) error {
	if path == stdio {
		return e.writeOutput(path, data, 0o644)
	}
	return asuser.WriteFile(c, path, data, 0o644)
}

// manifestErr words a failure to write --manifest: the kernel's answer,
// with a symlink (ELOOP under O_NOFOLLOW) said as such.
func manifestErr(err error) error {
	if errors.Is(err, unix.ELOOP) {
		return errors.New("is a symlink, which is never followed")
	}
	return unwrapPath(err)
}

// quietReasons are the admission refusals about --observation or
// --inference whose message may quote the document before anything
// verified it (a parser's error, an unverified analyzer name or
// payloadType), with the generic message shown instead.
var quietReasons = map[string]string{
	string(admission.ReasonPreflightMismatch):  "is not a valid observation, or not the one re-derived for this command",
	string(admission.ReasonInferenceMalformed): "is not a valid signed inference envelope",
	string(admission.ReasonUnknownAnalyzer):    "is not signed by an analyzer key the catalog lists",
	string(admission.ReasonBadSignature):       "is not signed by an analyzer key the catalog lists",
}

// quiet replaces a refusal's message that may echo a file's content.
func (o *runOptions) quiet(rf *spec.Refusal) *spec.Refusal {
	generic, ok := quietReasons[rf.Reason]
	if !ok {
		return rf
	}
	path := o.inference
	fix := "pass the analyzer's signed envelope for this observation, unmodified"
	if rf.Field == "--observation" {
		path = o.observation
		fix = "re-run gensee observe with the same user, --workspace and --env and pass its output"
	}
	if path == "" {
		return rf
	}
	out := *rf
	out.Message = rf.Field + " " + path + " " + generic + " (the details are in the refusals log)"
	out.Fix = fix
	return &out
}

// invokerCreds are the credentials files named on the command line are
// opened with.
func invokerCreds(id hostrun.Identity) asuser.Creds {
	return asuser.Lookup(id.UID, id.GID, id.Name)
}
