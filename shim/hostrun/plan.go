package hostrun

import (
	"path/filepath"
	"strings"
)

// Runtime is the selector's runtime fact for this front door.
const Runtime = "host"

// Command is what a host run executes, fixed before anything is observed:
// its argv, the environment the run defines and its cwd (the workspace).
// Its digest is the observation's command_digest.
type Command struct {
	Args      []string
	Env       []string
	Cwd       string
	Workspace string
	User      Identity
}

// NewCommand validates argv, --env and the workspace path (lexically; see
// CheckWorkspace for the file system) and fixes the command.
func NewCommand(args, extraEnv []string, workspace string, id Identity) (Command, *Refusal) {
	if len(args) == 0 || args[0] == "" {
		return Command{}, refuse(ReasonCommand, "argv", "put the command after --: gensee boundary run ... -- CMD ARGS", "no command given")
	}
	for i, a := range args {
		if strings.ContainsRune(a, 0) {
			return Command{}, refuse(ReasonCommand, "argv", "remove the NUL byte", "argv[%d] holds a NUL byte", i)
		}
	}
	env, err := RunEnv(id, extraEnv)
	if err != nil {
		return Command{}, refuse(ReasonEnv, "--env", "fix the --env flags", "%v", err)
	}
	if r := checkWorkspacePath(workspace); r != nil {
		return Command{}, r
	}
	return Command{Args: append([]string(nil), args...), Env: env, Cwd: workspace, Workspace: workspace, User: id}, nil
}

// checkWorkspacePath: absolute, clean, not "/", and free of the characters
// overlay's option string gives a meaning to.
func checkWorkspacePath(ws string) *Refusal {
	const field = "--workspace"
	switch {
	case ws == "":
		return refuse(ReasonWorkspace, field, "pass --workspace DIR, the directory the command works in", "no workspace given")
	case !filepath.IsAbs(ws) || filepath.Clean(ws) != ws:
		return refuse(ReasonWorkspace, field, "pass an absolute, clean path (no trailing /, no . or ..)", "%q is not an absolute, clean path", ws)
	case ws == "/":
		return refuse(ReasonWorkspace, field, "pass the project's directory, not the root", "the root cannot be the workspace")
	case strings.ContainsAny(ws, ",:\\=\n"):
		return refuse(ReasonWorkspace, field, "move or rename the workspace", "%q holds a character (one of , : \\ = newline) overlay cannot take in a lowerdir", ws)
	}
	return nil
}
