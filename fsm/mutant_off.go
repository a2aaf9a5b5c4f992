//go:build !mutants

package fsm

// In normal builds apply ignores an entry's Extensions: global
// positions are assigned at apply in log order, apply decides every
// append's client ids and condition itself, and expiry removes exactly
// what the limits allow (see mutant_on.go for the mutants).

func proposedGlobal(*Entry) int64 { return 0 }

func idsDecidedByLeader(*Entry) bool { return false }

func conditionDecidedByLeader(*Entry) bool { return false }

func expireOneTooMany(*Entry) bool { return false }

func expireAgeEarly(*Entry) bool { return false }

func indexDropsEntry(byte, int64) bool { return false }

func indexSkipsRemoval(byte, int64) bool { return false }
