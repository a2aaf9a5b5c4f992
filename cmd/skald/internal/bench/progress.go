package bench

import (
	"fmt"
	"io"
	"os"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// progress writes a progress line of a long run: over the last one on a
// terminal (\r), as a line of its own when the output goes to a file or
// a pipe, where \r would pile the lines into one.
type progress struct {
	w        io.Writer
	terminal bool
	dirty    bool // a \r line is open
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, terminal: ok && command.IsTerminal(f)}
}

// printf writes one progress line.
func (p *progress) printf(format string, args ...any) {
	if p.terminal {
		fmt.Fprintf(p.w, "\r"+format, args...)
		p.dirty = true
		return
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// done ends an open \r line.
func (p *progress) done() {
	if p.dirty {
		fmt.Fprintln(p.w)
		p.dirty = false
	}
}
