//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd

package main

import "os"

// isTerminal reports whether f is a terminal: never known here, so
// destructive commands need --yes.
func isTerminal(*os.File) bool { return false }
