// Package answercache keeps the encoded answers of routes that clients poll, such as a list a UI
// asks for twice a second, and serves them again while what they were computed from is
// unchanged: the answer is computed and encoded once per change of its inputs, not once per
// request.
//
// Each answer is kept under a key (the route and what of the request shapes the answer) with
// the version of its inputs (any comparable value: counters such as fleetcache's
// Kind.Generation). An Answer is served with a strong ETag, the hash of its bytes, so that
// replicas behind one address agree; a request whose If-None-Match names it is answered 304 with
// no body; and a client that accepts gzip is sent the answer compressed, once per answer.
//
// The cache does not authorize: the caller checks that each requester may see the answer first,
// and keys answers that differ by requester apart.
package answercache
