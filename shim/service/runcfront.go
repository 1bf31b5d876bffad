package service

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"google.golang.org/protobuf/proto"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/runcfront"
)

// runcFront finds the runc front (gensee-runc, shim/runcfront) beside the
// shim once: the program the inner task service runs as its runc, which
// starts and deletes a task itself and runs the real runc for the rest.
type runcFront struct {
	once sync.Once
	path string // "" when there is no trusted front: the real runc is run
}

// binary is the front's path when it sits beside the shim and is as
// trusted as it (fsafe.OpenTrustedSibling); "" otherwise. go-runc runs it
// by that path: only root or the shim's owner may replace it there.
func (f *runcFront) binary() string {
	f.once.Do(func() {
		if fh, err := fsafe.OpenTrustedSibling(runcfront.Binary); err == nil {
			f.path = fh.Name()
			fh.Close()
		}
	})
	return f.path
}

// handRunc is the runc options the inner task service gets for the task
// in bundle: o (admitted, the operator's runc pinned) with the front as
// its binary, and the absolute path of real (the binary checkSeccomp
// found for o) in the bundle's runcfront.RuncFile for the front to run;
// o itself without a front.
func (s *service) handRunc(bundle string, o *runcoptions.Options, real string) (*runcoptions.Options, error) {
	front := s.front.binary()
	// The front reads the real runc from the bundle only where no one but
	// root or the shim's owner may write the directories above it; where
	// they fail that, the task gets the real runc itself.
	if front == "" || real == "" || fsafe.TrustedDirs(bundle, uint32(os.Geteuid())) != nil {
		return o, nil
	}
	real, err := filepath.Abs(real)
	if err != nil {
		return nil, fmt.Errorf("find runc binary %q: %w", real, err)
	}
	// Not fsynced, as containerd writes the bundle: it ends with the machine.
	if err := record.ReplaceFile(filepath.Join(bundle, runcfront.RuncFile), []byte(real+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the runc front's runc: %w", err)
	}
	h := proto.Clone(o).(*runcoptions.Options)
	h.BinaryName = front
	return h, nil
}
