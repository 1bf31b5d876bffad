package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// HelperInputLimit bounds the JSON input a helper reads.
const HelperInputLimit = 16 << 20

// HelperMain is the gate helper process: it reads an Input as JSON on
// stdin, runs the gate, makes what it staged durable (SyncStaged) and
// writes the Result as JSON on stdout, so the caller may write the
// manifest naming the staged products as soon as it has the result. Exit
// 0: a result was written (whatever its verdict); 1: the gate could not
// run or its staged copies could not be synced (message on stderr). The shim runs the gate in such a process so that a
// panic, a hang or a memory blow-up in the gate costs a failed verdict,
// never the shim or a hung Delete. It imports nothing of the shim, so the
// dedicated binary (cmd/gensee-gate-helper) stays small and starts fast.
func HelperMain(stdin io.Reader, stdout, stderr io.Writer) int {
	return helperMain(stdin, stdout, stderr, realSyncer)
}

func helperMain(stdin io.Reader, stdout, stderr io.Writer, s syncer) int {
	var in Input
	if err := json.NewDecoder(io.LimitReader(stdin, HelperInputLimit)).Decode(&in); err != nil {
		fmt.Fprintln(stderr, "gate helper: decode input:", err)
		return 1
	}
	res, err := Run(context.Background(), in)
	if err == nil {
		err = syncStaged(in.StagingDir, res, s)
	}
	if err != nil {
		fmt.Fprintln(stderr, "gate helper:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "gate helper: encode result:", err)
		return 1
	}
	return 0
}
