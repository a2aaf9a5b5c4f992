package command

// ExitError carries a process exit code: main exits with Code after
// printing Err.
type ExitError struct {
	Code int
	Err  error
}

// Exit is err with the exit code code.
func Exit(code int, err error) *ExitError { return &ExitError{Code: code, Err: err} }

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }
