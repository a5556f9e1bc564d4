// Package intern makes equal short strings of cached objects' metadata share one copy: a decoder
// allocates every string of every object anew, so across a fleet's caches "app.kubernetes.io/name"
// or a namespace's name is otherwise held once per object per member.
package intern
