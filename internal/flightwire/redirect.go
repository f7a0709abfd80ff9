package flightwire

import "context"

// Redirects follows the NotLeader redirects of one request: a node that
// does not lead the request's bucket answers with the address of the one
// it believes does, and the request goes there, for a bounded number of
// hops (more means the cluster's view is changing under the request, and
// the caller should back off and ask again). The zero value follows no
// redirect.
//
// Follow calls again only after a redirect, which says that the node did
// nothing with the request: a write whose outcome is unknown, like any
// other error, ends Follow and is returned as it is.
type Redirects struct {
	// Max bounds the redirects followed: Follow calls at most Max+1 times.
	Max int
	// To returns the address err redirects to, and false when err is not
	// a redirect to follow. Nil means RedirectTarget (errors as they come
	// off the wire); a server that maps statuses to its own errors before
	// looking at them passes its own.
	To func(err error) (addr string, ok bool)
	// Followed, if not nil, learns of every redirect followed, before the
	// call at its address (a client caches the bucket's new leader).
	Followed func(to string)
}

// RedirectTarget returns the host:port a NotLeader error names, and false
// when err is not a NotLeader error or its location is not host:port (a
// redirect to a bad location is not followed).
func RedirectTarget(err error) (string, bool) {
	r, ok := RedirectOf(err)
	if !ok {
		return "", false
	}
	to, perr := r.Addr()
	return to, perr == nil
}

// Follow calls call at addr and, while it fails with a redirect that To
// accepts and fewer than Max redirects have been followed, at the address
// the redirect names. It returns the address of the last call and that
// call's error: nil, the last redirect (Max were followed, or To refused
// it), or any other error, unchanged.
//
// ctx is passed to every call; Follow does not wait, so a request whose
// ctx ends stops with the error of the call that saw it.
func (r Redirects) Follow(ctx context.Context, addr string, call func(ctx context.Context, addr string) error) (string, error) {
	to := r.To
	if to == nil {
		to = RedirectTarget
	}
	for hops := 0; ; hops++ {
		err := call(ctx, addr)
		if err == nil {
			return addr, nil
		}
		next, ok := to(err)
		if !ok || hops >= r.Max {
			return addr, err
		}
		if r.Followed != nil {
			r.Followed(next)
		}
		addr = next
	}
}
