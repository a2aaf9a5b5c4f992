//go:build !mutants

package fsm

import "github.com/hashicorp/raft"

// In normal builds apply ignores a Raft entry's Extensions: global
// positions are assigned at apply in log order, and apply decides every
// append's client ids and condition itself (see mutant_on.go for the
// mutants).

func proposedGlobal(*raft.Log) int64 { return 0 }

func idsDecidedByLeader(*raft.Log) bool { return false }

func conditionDecidedByLeader(*raft.Log) bool { return false }
