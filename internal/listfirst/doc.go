// Package listfirst makes an informer start from a list, then watch, rather than from a watch
// that streams the initial state (client-go's WatchListClient, on by default): for a client
// caching many members, a list costs less to decode, and leaves no 16 KiB HTTP/2 data buffer
// behind on each member's watch stream afterwards (BenchmarkCaches, BenchmarkEngage).
package listfirst
