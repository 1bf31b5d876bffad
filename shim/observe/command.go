package observe

import "github.com/gensee/gensee/spec"

// CommandDigest returns the command digest of args, env and cwd exactly as
// FromRootfs computes it: spec.Command{Args, Env, Cwd}.Digest(), the
// "sha256:<hex>" of the canonical JSON {"args":[...],"cwd":"...","env":[...]}
// with the values verbatim (order and duplicates kept, nil lists as []).
func CommandDigest(args, env []string, cwd string) (string, error) {
	return spec.Command{Args: args, Env: env, Cwd: cwd}.Digest()
}
