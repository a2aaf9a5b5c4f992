package command

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"connectrpc.com/connect"
)

// Report prints err, a command's failure, on stderr and returns the
// process's exit code: an *ExitError's code, 1 for any other error, 0 for
// --help (flag.ErrHelp, its text already printed). A command line asking
// for -o json gets the error as JSON too.
func Report(stderr io.Writer, args []string, err error) int {
	code := ExitFailure
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		code = ExitOK
	case wantsJSON(args):
		printJSONError(stderr, code, err)
	default:
		fmt.Fprintln(stderr, "skald:", err)
	}
	return code
}

// wantsJSON reports whether a command line asks for -o json, flags being
// anywhere before "--" as parseInterspersed takes them: errors are then
// JSON too.
func wantsJSON(args []string) bool {
	for i, a := range args {
		switch a {
		case "--":
			return false
		case "-o", "--o":
			if i+1 < len(args) && args[i+1] == "json" {
				return true
			}
		case "-o=json", "--o=json":
			return true
		}
	}
	return false
}

// printJSONError writes a command's error as one JSON object:
// {"error":{"exitCode":4,"code":"not_found","message":"..."}}, code being
// the API's when a server answered.
func printJSONError(w io.Writer, exitCode int, err error) {
	type jsonError struct {
		ExitCode int    `json:"exitCode"`
		Code     string `json:"code,omitempty"`
		Message  string `json:"message"`
	}
	e := jsonError{ExitCode: exitCode, Message: err.Error()}
	var ce *connect.Error
	if errors.As(err, &ce) {
		e.Code = ce.Code().String()
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(struct {
		Error jsonError `json:"error"`
	}{e})
}
