// Package jsonscan holds hand-written JSON scanners for the hot paths
// that see every message: apply's validation of message data (Valid,
// ValidText), the EventoDB API's split of a POST /rpc body into its
// arguments (Elements, Members, Compact), and the index loop's lookup of
// a field by its JSON pointer (PointerTokens, Lookup).
//
// Every function agrees with encoding/json on the inputs it accepts and
// declines (ok false) anything it is not sure of, so its callers fall back
// to encoding/json for those and for every error message. Lookup has no
// fallback: it answers as decoding with encoding/json would, on every
// input. It must never accept what encoding/json refuses: the fuzz tests
// hold each function to encoding/json's answer. ValidText and Elements are stricter by design:
// they also refuse what encoding/json would read with U+FFFD in place of
// bad text (invalid UTF-8, unpaired surrogate escapes), and BadText says
// where; a caller that falls back to encoding/json must check BadText
// itself, or encoding/json repairs the text silently.
package jsonscan
