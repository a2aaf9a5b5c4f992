//go:build unix

package server

import "syscall"

// fdLimit returns the process's RLIMIT_NOFILE, soft and hard.
func fdLimit() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	return uint64(r.Cur), uint64(r.Max), nil
}
