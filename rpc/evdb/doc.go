// Package evdb holds the wire contract of the EventoDB HTTP API (the
// EventoDB HTTP API specification, as docs/eventodb-api.md serves it) that
// Skald serves on its API port beside the Connect services: the /rpc
// envelope ["method", args...] and its positional arguments and options,
// the error reply {"error": {code, message, details}}, the bearer token's
// places in a request, the messages and times the reads answer with, the
// query of /subscribe, and the NDJSON records and in-band errors of
// /import.
//
// It owns how EventoDB's requests are read and its replies are written,
// byte for byte. It never maps an error of the node or the state machine
// itself: package rpc's error table does, once for both APIs, and hands
// the result over as an *Error. It never speaks to the node: the handlers
// that do (package rpc) reach it only through rpc.Backend, and check
// authentication and access with the rules shared with the Connect
// services. It imports nothing of Skald's but fsm and its records
// (names, positions and times are validated by fsm's rules) and
// internal/jsonscan.
package evdb
