// Package jsonscan holds hand-written JSON scanners for the two hot paths
// that see every message: apply's validation of message data (Valid) and
// the EventoDB API's split of a POST /rpc body into its arguments
// (Elements, Members, Compact).
//
// Every function agrees with encoding/json on the inputs it accepts and
// declines (ok false) anything it is not sure of, so its callers fall back
// to encoding/json for those and for every error message. It must never
// accept what encoding/json refuses: the fuzz tests hold each function to
// encoding/json's answer.
package jsonscan
