//go:build unix

package command

import "syscall"

// PrivateUmask makes every file and directory the process creates from
// now on closed to group and others.
func PrivateUmask() { syscall.Umask(0o077) }
