package answercache

import (
	"container/list"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"sync/atomic"
)

// Cache keeps the most recently used answers, each under its key with the version of the inputs
// it was computed from, within a bound on their number and one on their bytes. A Cache is safe
// for concurrent use.
type Cache[V comparable] struct {
	max      int
	maxBytes int64

	mu    sync.Mutex
	byKey map[string]*list.Element // of *kept[V]
	lru   list.List                // most recently used first
	bytes int64

	computed atomic.Uint64
}

type kept[V comparable] struct {
	key     string
	version V
	answer  *Answer
}

// New is a Cache of at most max answers holding at most maxBytes between them (their bodies;
// compressed copies, a fraction of that, are not counted against it); the least recently used
// go first. An answer larger than maxBytes is served and not kept. A Cache of 0 keeps none,
// and computes every answer. A key made of a request's query gives each distinct query an
// answer of its own: the bounds are what keeps such keys from holding memory without end.
func New[V comparable](max int, maxBytes int64) *Cache[V] {
	return &Cache[V]{max: max, maxBytes: maxBytes, byKey: map[string]*list.Element{}}
}

// Answer is the answer kept under key if it was computed at version; otherwise it is the body
// compute returns, kept under key at version. compute's error is returned and nothing is kept.
//
// Read version before what compute reads: a change made while compute runs then moves the
// version on, and the answer, kept at the version before, is computed again at the next request.
func (c *Cache[V]) Answer(key string, version V, contentType string, compute func() ([]byte, error)) (*Answer, error) {
	if a := c.lookup(key, version); a != nil {
		return a, nil
	}
	c.computed.Add(1)
	body, err := compute()
	if err != nil {
		return nil, err
	}
	a := newAnswer(body, contentType)
	c.keep(key, version, a)
	return a, nil
}

func (c *Cache[V]) lookup(key string, version V) *Answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	k := el.Value.(*kept[V])
	if k.version != version {
		return nil
	}
	c.lru.MoveToFront(el)
	return k.answer
}

func (c *Cache[V]) keep(key string, version V, a *Answer) {
	if c.max <= 0 || a.size() > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.drop(el)
	}
	c.byKey[key] = c.lru.PushFront(&kept[V]{key: key, version: version, answer: a})
	c.bytes += a.size()
	for c.lru.Len() > c.max || c.bytes > c.maxBytes {
		c.drop(c.lru.Back())
	}
}

// drop forgets el. Called with c.mu held.
func (c *Cache[V]) drop(el *list.Element) {
	k := c.lru.Remove(el).(*kept[V])
	delete(c.byKey, k.key)
	c.bytes -= k.answer.size()
}

// Bytes is the memory the kept answers hold: their bodies, and those compressed so far.
func (c *Cache[V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gz int64
	for el := c.lru.Front(); el != nil; el = el.Next() {
		gz += el.Value.(*kept[V]).answer.gzipSize()
	}
	return c.bytes + gz
}

// Computed is how many answers have been computed (and not found kept), errors included.
func (c *Cache[V]) Computed() uint64 { return c.computed.Load() }

// Len is how many answers are kept.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// etagOf is a strong ETag of body: replicas that compute the same answer give the same tag.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
}
