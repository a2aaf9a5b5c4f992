//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd

package command

import "os"

// IsTerminal reports whether f is a terminal: never known here, so
// destructive commands need --yes.
func IsTerminal(*os.File) bool { return false }
