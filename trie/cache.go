package trie

import (
	"container/list"
	"sync"
)

// DefaultCacheSize is the capacity of a Cache built with size <= 0.
const DefaultCacheSize = 4096

// Cache keeps the action tries of recently seen states, least recently used
// out first. Keys are the caller's: anything comparable that determines the
// Spec completely (a state fingerprint, plus whether ending is allowed if
// that varies). It is safe for concurrent use.
type Cache[K comparable] struct {
	mu    sync.Mutex // protects everything below
	size  int
	ll    *list.List // of *cacheEntry[K], most recent first
	items map[K]*list.Element
	hits  int64
	miss  int64
}

type cacheEntry[K comparable] struct {
	key K
	at  *ActionTrie
}

// NewCache returns a cache holding up to size action tries
// (DefaultCacheSize when size <= 0).
func NewCache[K comparable](size int) *Cache[K] {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Cache[K]{size: size, ll: list.New(), items: make(map[K]*list.Element)}
}

// Get returns the action trie cached for key, building it from spec() when
// absent. spec runs without the lock held (so two goroutines may build the
// same key at once; the first stored wins and both get it); its error, or
// NewActionTrie's, is returned and nothing is cached.
func (c *Cache[K]) Get(key K, spec func() (Spec, error)) (*ActionTrie, error) {
	if at, ok := c.lookup(key); ok {
		return at, nil
	}
	s, err := spec()
	if err != nil {
		return nil, err
	}
	at, err := NewActionTrie(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*cacheEntry[K]).at, nil
	}
	c.items[key] = c.ll.PushFront(&cacheEntry[K]{key, at})
	for c.ll.Len() > c.size {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*cacheEntry[K]).key)
	}
	return at, nil
}

// lookup returns a cached trie and counts the hit or miss.
func (c *Cache[K]) lookup(key K) (*ActionTrie, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		c.miss++
		return nil, false
	}
	c.hits++
	c.ll.MoveToFront(el)
	return el.Value.(*cacheEntry[K]).at, true
}

// CacheStats are a cache's running totals.
type CacheStats struct {
	Len, Size    int   // tries held, capacity
	Hits, Misses int64 // Get calls answered from the cache, and not
}

// Stats returns the cache's totals.
func (c *Cache[K]) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Len: c.ll.Len(), Size: c.size, Hits: c.hits, Misses: c.miss}
}
