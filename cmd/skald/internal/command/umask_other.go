//go:build !unix

package command

// PrivateUmask has nothing to set where there is no umask.
func PrivateUmask() {}
