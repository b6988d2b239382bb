package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
)

// errRegistryClosed stops a hashing that the server's shutdown overtook.
var errRegistryClosed = errors.New("the model registry is closed")

// digestCache holds the sha256 digests of model files in the models folder,
// as Ollama reports them ("sha256:<hex>") in /api/tags. Hashing a
// multi-gigabyte GGUF takes seconds, so a file's digest is computed once in
// the background (one file at a time) and listed from then on; a file that
// changes (size or modification time) is hashed again.
type digestCache struct {
	mu      sync.Mutex
	sums    map[string]fileDigest
	pending []string // files waiting to be hashed, in order
	running bool     // a hashing goroutine is working through pending
}

// fileDigest is a file's digest and the size and time it was computed for.
type fileDigest struct {
	size int64
	mod  time.Time
	sum  string // "" while being computed
}

// digest returns the digest of the models-folder file at path ("" while it
// is being computed) and starts computing it if it is new or changed.
func (r *registry) digest(path string, fi fs.FileInfo) string {
	c := &r.digests
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.sums[path]; ok && d.size == fi.Size() && d.mod.Equal(fi.ModTime()) {
		return d.sum
	}
	if c.sums == nil {
		c.sums = map[string]fileDigest{}
	}
	c.sums[path] = fileDigest{size: fi.Size(), mod: fi.ModTime()}
	c.pending = append(c.pending, path)
	if !c.running {
		r.mu.Lock()
		closed := r.closed
		if !closed {
			r.wg.Add(1)
		}
		r.mu.Unlock()
		if !closed {
			c.running = true
			go r.hashPending()
		}
	}
	return ""
}

// hashPending hashes the pending files one by one until none is left or
// the registry closes.
func (r *registry) hashPending() {
	defer r.wg.Done()
	c := &r.digests
	for {
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		path := c.pending[0]
		c.pending = c.pending[1:]
		want := c.sums[path]
		c.mu.Unlock()

		sum, err := r.hashFile(path)
		if err != nil {
			r.log.Debug("hashing a model file", "file", path, "err", err)
			continue
		}
		c.mu.Lock()
		if d := c.sums[path]; d.size == want.size && d.mod.Equal(want.mod) {
			d.sum = sum
			c.sums[path] = d
		}
		c.mu.Unlock()
	}
}

// hashFile returns "sha256:<hex>" of the file, or an error if it cannot
// be read or the registry closes meanwhile.
func (r *registry) hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-r.stop:
			return "", errRegistryClosed
		default:
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", err
		}
	}
}
