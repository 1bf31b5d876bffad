package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// seccomp_data's layout (include/uapi/linux/seccomp.h): nr, arch, ip, args[6].
// Arguments are 64-bit; the offsets below are of their low 32 bits, which is
// where they sit on the little-endian amd64 and arm64.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func argLow(i uint32) uint32 { return offArgs + 8*i }

// asm builds a classic BPF program whose jumps name labels; assemble turns
// them into the 8-bit forward offsets the kernel wants. The label "" is the
// next instruction.
type asm struct {
	ins    []unix.SockFilter
	jumps  map[int][2]string // instruction index → true, false label
	labels map[string]int
}

func newAsm() *asm { return &asm{jumps: map[int][2]string{}, labels: map[string]int{}} }

func (a *asm) label(name string) { a.labels[name] = len(a.ins) }

// load puts the 32-bit word at off of seccomp_data into the accumulator.
func (a *asm) load(off uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

// jeq jumps to jt when the accumulator equals k, else to jf.
func (a *asm) jeq(k uint32, jt, jf string) { a.jump(unix.BPF_JEQ, k, jt, jf) }

// jset jumps to jt when the accumulator has any bit of k set, else to jf.
func (a *asm) jset(k uint32, jt, jf string) { a.jump(unix.BPF_JSET, k, jt, jf) }

func (a *asm) jump(op uint16, k uint32, jt, jf string) {
	a.jumps[len(a.ins)] = [2]string{jt, jf}
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (a *asm) ret(k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

// assemble resolves every jump; a label that is missing, behind the jump or
// more than 255 instructions ahead is an error (the program is then wrong,
// not the input).
func (a *asm) assemble() ([]unix.SockFilter, error) {
	out := append([]unix.SockFilter(nil), a.ins...)
	for i, j := range a.jumps {
		for k, name := range j {
			off := 0
			if name != "" {
				at, ok := a.labels[name]
				if !ok {
					return nil, fmt.Errorf("assemble seccomp program: no label %q", name)
				}
				off = at - (i + 1)
			}
			if off < 0 || off > 255 {
				return nil, fmt.Errorf("assemble seccomp program: jump from %d to %q is %d instructions", i, name, off)
			}
			if k == 0 {
				out[i].Jt = uint8(off)
			} else {
				out[i].Jf = uint8(off)
			}
		}
	}
	if len(out) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("assemble seccomp program: %d instructions, the kernel takes %d", len(out), unix.BPF_MAXINSNS)
	}
	return out, nil
}
