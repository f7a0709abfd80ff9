package metalog

// Queued is how many campaigns wait behind the lease holder, for the tests
// in metalog_test.
func (e *MemElection) Queued() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.mu.queue)
}
