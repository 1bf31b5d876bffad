package cli

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// completeArg is the hidden first argument the completion scripts call
// gensee with: gensee __complete WORD... prints the candidates for the
// last WORD, one a line, read from the command tree. No candidate lets the
// shell complete a file name.
const completeArg = "__complete"

func completionCommand() *Command {
	return &Command{
		Name:       "completion",
		Summary:    "print a shell completion script (bash, zsh or fish)",
		Args:       "bash|zsh|fish",
		Positional: "shell",
		Long: `Prints a script that completes gensee's commands, subcommands and flags
from the command tree of the gensee binary it calls (so it never goes stale):

  bash:  source <(gensee completion bash)
         or: gensee completion bash > /etc/bash_completion.d/gensee
  zsh:   gensee completion zsh > "${fpath[1]}/_gensee"
  fish:  gensee completion fish > ~/.config/fish/completions/gensee.fish

Flag values and ids complete as file names.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var shell string
			fs.StringVar(&shell, "shell", "", "the shell `SH`: bash, zsh or fish (or give it as the argument)")
			return func(_ context.Context, env *Env) error {
				script, ok := completionScripts[shell]
				if !ok {
					return errUsage("name the shell: gensee completion bash|zsh|fish")
				}
				if _, err := fmt.Fprint(env.Stdout, script); err != nil {
					return fail(ExitUsage, "write output", err, "")
				}
				return nil
			}
		},
	}
}

var completionScripts = map[string]string{
	"bash": `# bash completion for gensee (gensee completion bash)
_gensee() {
    local IFS=$'\n'
    COMPREPLY=($(gensee __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _gensee gensee
`,
	"zsh": `#compdef gensee
# zsh completion for gensee (gensee completion zsh)
_gensee() {
    local -a cands
    cands=("${(@f)$(gensee __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ -n ${cands[1]} ]]; then
        compadd -- "${cands[@]}"
    else
        _files
    fi
}
compdef _gensee gensee
`,
	"fish": `# fish completion for gensee (gensee completion fish)
function __gensee_complete
    set -l words (commandline -opc) (commandline -ct)
    set -l out (gensee __complete $words[2..-1] 2>/dev/null)
    if test (count $out) -eq 0
        __fish_complete_path (commandline -ct)
    else
        printf '%s\n' $out
    end
end
complete -c gensee -f -a '(__gensee_complete)'
`,
}

// complete prints the candidates for the last of words (the word under the
// cursor, maybe empty) after the words before it.
func complete(env *Env, root *Command, words []string) error {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	fs := quietFlagSet("gensee")
	defaultGlobals(nil).define(fs, true)
	node, path := root, []string{}
	wantValue := "" // the flag before cur takes a value
	for i := 0; i < len(before); i++ {
		w := before[i]
		if w == "--" {
			return nil // a command or ids follow: files
		}
		if strings.HasPrefix(w, "-") {
			name := strings.TrimLeft(w, "-")
			if f := fs.Lookup(name); f != nil && !strings.Contains(name, "=") && !isBool(f) {
				if i == len(before)-1 {
					wantValue = name
				}
				i++ // its value
			}
			continue
		}
		if node.Setup != nil {
			continue // a positional argument
		}
		next := node.sub(w)
		if next == nil {
			return nil
		}
		node, path = next, append(path, w)
		if node.Setup != nil {
			fs, _ = leafFlags(node, path, nil)
		}
	}
	var cands []string
	switch {
	case wantValue == "format":
		cands = []string{"json", "table"}
	case wantValue != "":
	case node.Name == "completion" && len(path) == 1:
		cands = []string{"bash", "fish", "zsh"}
	case strings.HasPrefix(cur, "-"):
		fs.VisitAll(func(f *flag.Flag) {
			if len(f.Name) == 1 {
				cands = append(cands, "-"+f.Name)
			} else {
				cands = append(cands, "--"+f.Name)
			}
		})
	case node.Setup == nil:
		for _, s := range node.Subs {
			cands = append(cands, s.Name)
		}
	}
	slices.Sort(cands)
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(env.Stdout, c)
		}
	}
	return nil
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
