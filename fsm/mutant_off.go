//go:build !mutants

package fsm

import "github.com/hashicorp/raft"

// In normal builds apply ignores a Raft entry's Extensions: global
// positions are assigned at apply in log order, apply decides every
// append's client ids and condition itself, and expiry removes exactly
// what the limits allow (see mutant_on.go for the mutants).

func proposedGlobal(*raft.Log) int64 { return 0 }

func idsDecidedByLeader(*raft.Log) bool { return false }

func conditionDecidedByLeader(*raft.Log) bool { return false }

func expireOneTooMany(*raft.Log) bool { return false }

func expireAgeEarly(*raft.Log) bool { return false }
