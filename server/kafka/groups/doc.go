// Package groups is the group coordinator of mink's Kafka listener: the
// classic consumer-group protocol (FindCoordinator, JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup, DescribeGroups, ListGroups) and committed offsets
// (OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups). docs/kafka.md ("Consumer groups")
// describes the behaviour clients see.
//
// One node coordinates every group: the holder of the coordinator lease
// (Config.Coordinator). Membership — members, generations, the chosen
// protocol, assignments — lives in memory on that node and is lost when the
// lease moves; members then get NOT_COORDINATOR, find the new coordinator
// and rejoin, as with a Kafka coordinator failover. Committed offsets are
// records in the metadata log (catalog.CommitGroupOffsets), so every node
// has them and they survive restarts. Each record carries the coordinator
// epoch; a deposed coordinator's late commit is rejected by the log.
//
// The rebalance state machine (group.go, join.go) is deterministic given
// the clock: every transition takes the current time, deadlines are
// fields of the group, and expire(now) applies those that passed. It does
// no I/O; it answers a blocked JoinGroup or SyncGroup by filling in the
// response the handler waits for. Handle (offsets.go) releases the lock
// before proposing to the metadata log.
//
// Goroutines: New starts one, the timer loop, which calls expire when the
// earliest deadline passes (and at least every second, which also notices
// that this node lost the coordinator lease). Close stops it and answers
// every blocked request. All methods are safe for concurrent use; one
// mutex (Coordinator.mu) guards all group state.
package groups
