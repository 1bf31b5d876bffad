package hostrun

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/observe"
)

// What runs is what was hashed (issue "exe rewritten after hashing"): an
// fd pins an inode, not its bytes, so a file the user can write could be
// rewritten between the hash and the exec. The command is therefore
// executed from a memfd holding a copy of the file, sealed against any
// change (F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL) before it is
// hashed; the hash admission decides on is the copy's. A #! script is
// executed the same way: its interpreter from a sealed copy, the script
// handed to it as /dev/fd/N of its own sealed copy.

// sealedFile is a sealed copy of a host file and the sha256 of its bytes.
type sealedFile struct {
	File   *os.File
	Path   string // the host path it was copied from
	SHA256 string
}

// allSeals leave a memfd's contents fixed for its whole life.
const allSeals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

// seal copies src into a new memfd, seals it and hashes the sealed bytes.
// src is read from its start; the memfd is close-on-exec.
func seal(src *os.File, path string) (_ *sealedFile, retErr error) {
	fd, err := unix.MemfdCreate("gensee-exe", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("create the executable's sealed copy: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "memfd:"+path)
	defer func() {
		if retErr != nil {
			mf.Close()
		}
	}()
	n, err := io.Copy(mf, io.NewSectionReader(src, 0, observe.MaxExecutableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("copy %s into its sealed copy: %w", path, err)
	}
	if n > observe.MaxExecutableBytes {
		return nil, fmt.Errorf("executable %s grew past %d bytes while copied: %w", path, observe.MaxExecutableBytes, observe.ErrExecutableTooLarge)
	}
	if _, err := unix.FcntlInt(mf.Fd(), unix.F_ADD_SEALS, allSeals); err != nil {
		return nil, fmt.Errorf("seal the copy of %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(mf, 0, n)); err != nil {
		return nil, fmt.Errorf("hash the sealed copy of %s: %w", path, err)
	}
	return &sealedFile{File: mf, Path: path, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// sealedCommand is what the wrapper executes: the sealed executable and,
// for a #! script, the sealed interpreter and the argv the kernel would
// have built (interpreter, its optional argument, then the script's path,
// which is /dev/fd/<fdScript> in the command, then argv[1:]).
type sealedCommand struct {
	Exe    *sealedFile
	Interp *sealedFile // nil unless Exe starts with #!
	// InterpArgs are argv's first elements for a script: the interpreter's
	// path as the #! line names it and its optional argument.
	InterpArgs []string
}

func (c *sealedCommand) Close() {
	c.Exe.File.Close()
	if c.Interp != nil {
		c.Interp.File.Close()
	}
}

// maxShebang is the kernel's BINPRM_BUF_SIZE: the #! line it reads.
const maxShebang = 256

// errNestedInterpreter: the kernel would resolve a second #! itself, by
// path, past the seal.
var errNestedInterpreter = errors.New("the interpreter is itself a #! script; name the final interpreter in the #! line")

// sealCommand seals the resolved executable and, when it is a script, its
// interpreter (resolved as an explicit path with the run's env).
func sealCommand(f *os.File, path string, env []string) (_ *sealedCommand, retErr error) {
	exe, err := seal(f, path)
	if err != nil {
		return nil, err
	}
	c := &sealedCommand{Exe: exe}
	defer func() {
		if retErr != nil {
			c.Close()
		}
	}()
	interp, arg, ok, err := shebang(exe.File)
	if err != nil || !ok {
		return c, err
	}
	if !strings.HasPrefix(interp, "/") {
		return nil, fmt.Errorf("the #! line of %s names %q: the interpreter must be an absolute path", path, interp)
	}
	ifile, ipath, err := observe.ResolveHost(interp, "/", env)
	if err != nil {
		return nil, fmt.Errorf("the #! interpreter of %s: %w", path, err)
	}
	defer ifile.Close()
	if c.Interp, err = seal(ifile, ipath); err != nil {
		return nil, err
	}
	if _, _, nested, _ := shebang(c.Interp.File); nested {
		return nil, fmt.Errorf("%s: %w", ipath, errNestedInterpreter)
	}
	c.InterpArgs = []string{interp}
	if arg != "" {
		c.InterpArgs = append(c.InterpArgs, arg)
	}
	return c, nil
}

// shebang parses f's #! line as binfmt_script does: the interpreter up to
// the first blank, the rest (trimmed) one optional argument.
func shebang(f *os.File) (interp, arg string, ok bool, err error) {
	buf := make([]byte, maxShebang)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", "", false, fmt.Errorf("read the executable's first line: %w", err)
	}
	buf = buf[:n]
	if !bytes.HasPrefix(buf, []byte("#!")) {
		return "", "", false, nil
	}
	line := buf[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	} else if n == maxShebang {
		return "", "", false, fmt.Errorf("the #! line is longer than %d bytes", maxShebang)
	}
	s := strings.Trim(string(line), " \t")
	if s == "" {
		return "", "", false, fmt.Errorf("the #! line names no interpreter")
	}
	interp, rest, _ := strings.Cut(strings.ReplaceAll(s, "\t", " "), " ")
	return interp, strings.Trim(rest, " \t"), true, nil
}
