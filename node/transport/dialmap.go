package transport

// DialMap redirects this node's outgoing peer connections — Raft and
// node-to-node calls (forwarded writes, read index) — from an address to
// another: a dial to a key goes to its value. The chaos harness uses it to
// put a proxy on every link between two nodes (jepsen/, -net proxy);
// deployments have no use for it. Gossip is not redirected.
type DialMap map[string]string

func (m DialMap) target(addr string) string {
	if to, ok := m[addr]; ok {
		return to
	}
	return addr
}
