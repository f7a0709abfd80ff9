package catalog

import "fmt"

// checkNodeEpoch returns the rejection of a record acting for node at
// nodeEpoch when that is not node's current epoch (an unregistered node has
// none). what names the record in the message.
func (v *View) checkNodeEpoch(what string, node NodeID, nodeEpoch uint64) *Outcome {
	n := v.Nodes[node]
	if n == nil {
		out := reject(ErrStaleEpoch, "%s: node %d is not registered (record carries node epoch %d)", what, node, nodeEpoch)
		return &out
	}
	if n.Epoch != nodeEpoch {
		out := reject(ErrStaleEpoch, "%s: record carries node epoch %d of node %d, current is %d", what, nodeEpoch, node, n.Epoch)
		return &out
	}
	return nil
}

func applyRegisterNode(v *View, r RegisterNode) Outcome {
	if r.Node == 0 {
		return reject(ErrInvalid, "register node 0: node ids start at 1")
	}
	n := v.Nodes[r.Node]
	var current uint64
	if n != nil {
		current = n.Epoch
	}
	if r.ExpectEpoch != current {
		return reject(ErrStaleEpoch, "register node %d: expected node epoch %d, current is %d", r.Node, r.ExpectEpoch, current)
	}
	if n == nil {
		n = &Node{ID: r.Node}
		v.Nodes[r.Node] = n
	}
	n.Epoch = current + 1
	// A node registering a dead node to fence it may not know its addresses.
	if r.Addrs != (Addrs{}) {
		n.Addrs = r.Addrs
	}
	// Streams the node holds at an older node epoch stay open: the node that
	// takes over commits their data and closes them (CloseStream).
	return Outcome{Epoch: n.Epoch}
}

func applyRegisterCoordinator(v *View, r RegisterCoordinator) Outcome {
	what := fmt.Sprintf("register coordinator on node %d", r.Node)
	if r.Node == 0 {
		return reject(ErrInvalid, "%s: node ids start at 1", what)
	}
	if out := v.checkNodeEpoch(what, r.Node, r.NodeEpoch); out != nil {
		return *out
	}
	if r.ExpectEpoch != v.Coordinator.Epoch {
		return reject(ErrStaleEpoch, "%s: expected coordinator epoch %d, current is %d (node %d)",
			what, r.ExpectEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
	}
	v.Coordinator = Coordinator{Node: r.Node, Epoch: r.ExpectEpoch + 1}
	return Outcome{Epoch: v.Coordinator.Epoch}
}
