package cli

// root is the command tree. To add a command group, write one file with a
// function returning its *Command and list it here; dispatch, help and flag
// parsing are shared. Keep the order the help should show.
func root() *Command {
	return &Command{
		Name: "gensee",
		Subs: []*Command{
			analyzerCommand(),
			attentionCommand(),
			boundaryCommand(),
			catalogCommand(),
			eventsCommand(),
			inferenceCommand(),
			lsCommand(),
			manifestCommand(),
			observeCommand(),
			promoteCommand(),
			pruneCommand(),
			refusalsCommand(),
			verifyCommand(),
			completionCommand(),
			versionCommand(),
		},
	}
}
