// Package vectors finds the nearest of many unit vectors to one, exactly, by cosine similarity, over a compact in-memory copy.
//
// It is a package of its own because the search is one concern with its
// own trade-offs, apart from the tickets it serves: PostgreSQL without
// pgvector cannot rank 100,000 vectors fast (each row's real[] is
// unpacked), so the desk keeps a copy here, refreshed from the store, and
// asks it through an interface a pgvector query could take over. The
// search is exact (recall 1.0): a scan of float32 vectors laid out one
// after another, split across the CPUs, with the filter applied before
// the arithmetic. At 384 dimensions a vector costs 1.5 KiB.
package vectors

import (
	"container/heap"
	"math"
	"runtime"
	"sync"
	"time"
)

// Meta is what a search may filter on.
type Meta struct {
	Status     string
	Team       string
	CustomerID string
	Merged     bool
	Opened     time.Time
}

// Hit is a vector found, with its cosine similarity to the query.
type Hit struct {
	ID    string
	Score float32
	Meta  Meta
}

// Index holds unit vectors of one dimension by id. It is safe for
// concurrent use: searches share it, changes take it alone.
type Index struct {
	mu   sync.RWMutex
	dims int
	ids  []string
	vecs []float32 // len(ids) × dims, one after another
	meta []Meta
	pos  map[string]int
}

// New returns an empty index of vectors of dims floats.
func New(dims int) *Index {
	return &Index{dims: dims, pos: map[string]int{}}
}

// Dims is the length of the index's vectors.
func (ix *Index) Dims() int { return ix.dims }

// Len is how many vectors it holds.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.ids)
}

// Bytes is what its vectors take in memory.
func (ix *Index) Bytes() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return cap(ix.vecs) * 4
}

// Normalize returns v scaled to length 1 (a copy); nil for a zero vector
// or one of another length than want.
func Normalize(v []float32, want int) []float32 {
	if len(v) != want {
		return nil
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return nil
	}
	n := float32(1 / math.Sqrt(sum))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * n
	}
	return out
}

// Put adds or replaces id's vector and meta; a vector of another length
// removes it instead.
func (ix *Index) Put(id string, vec []float32, meta Meta) {
	unit := Normalize(vec, ix.dims)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if unit == nil {
		ix.removeLocked(id)
		return
	}
	if i, ok := ix.pos[id]; ok {
		copy(ix.vecs[i*ix.dims:(i+1)*ix.dims], unit)
		ix.meta[i] = meta
		return
	}
	ix.pos[id] = len(ix.ids)
	ix.ids = append(ix.ids, id)
	ix.vecs = append(ix.vecs, unit...)
	ix.meta = append(ix.meta, meta)
}

// SetMeta changes id's meta, if it is there.
func (ix *Index) SetMeta(id string, meta Meta) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if i, ok := ix.pos[id]; ok {
		ix.meta[i] = meta
	}
}

// Remove takes id out.
func (ix *Index) Remove(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeLocked(id)
}

func (ix *Index) removeLocked(id string) {
	i, ok := ix.pos[id]
	if !ok {
		return
	}
	last := len(ix.ids) - 1
	if i != last { // the last one takes its place
		ix.ids[i], ix.meta[i] = ix.ids[last], ix.meta[last]
		copy(ix.vecs[i*ix.dims:(i+1)*ix.dims], ix.vecs[last*ix.dims:])
		ix.pos[ix.ids[i]] = i
	}
	ix.ids, ix.meta, ix.vecs = ix.ids[:last], ix.meta[:last], ix.vecs[:last*ix.dims]
	delete(ix.pos, id)
}

// Vector returns a copy of id's unit vector, nil if it has none.
func (ix *Index) Vector(id string) []float32 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	i, ok := ix.pos[id]
	if !ok {
		return nil
	}
	return append([]float32(nil), ix.vecs[i*ix.dims:(i+1)*ix.dims]...)
}

// Search returns the k vectors nearest q (cosine), best first, among those
// keep takes (nil: all) and whose score is at least minScore; q need not
// be a unit vector.
func (ix *Index) Search(q []float32, k int, minScore float32, keep func(id string, m Meta) bool) []Hit {
	unit := Normalize(q, ix.dims)
	if unit == nil || k <= 0 {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := len(ix.ids)
	workers := max(1, min(runtime.GOMAXPROCS(0), n/2048+1))
	parts := make([]topK, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			top := topK{k: k}
			for i := lo; i < hi; i++ {
				if keep != nil && !keep(ix.ids[i], ix.meta[i]) {
					continue
				}
				s := dot(unit, ix.vecs[i*ix.dims:(i+1)*ix.dims])
				if s >= minScore {
					top.offer(i, s)
				}
			}
			parts[w] = top
		}()
	}
	wg.Wait()
	all := topK{k: k}
	for _, p := range parts {
		for _, c := range p.items {
			all.offer(c.i, c.score)
		}
	}
	return all.hits(ix)
}

// dot is the dot product of two vectors of the same length, four lanes at
// a time so that the CPU overlaps the multiplications.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// topK keeps the k best offers: a min-heap on the score.
type topK struct {
	k     int
	items []candidate
}

type candidate struct {
	i     int
	score float32
}

func (t *topK) Len() int           { return len(t.items) }
func (t *topK) Less(a, b int) bool { return t.items[a].score < t.items[b].score }
func (t *topK) Swap(a, b int)      { t.items[a], t.items[b] = t.items[b], t.items[a] }
func (t *topK) Push(x any)         { t.items = append(t.items, x.(candidate)) }
func (t *topK) Pop() any {
	last := t.items[len(t.items)-1]
	t.items = t.items[:len(t.items)-1]
	return last
}

func (t *topK) offer(i int, score float32) {
	switch {
	case len(t.items) < t.k:
		heap.Push(t, candidate{i, score})
	case score > t.items[0].score:
		t.items[0] = candidate{i, score}
		heap.Fix(t, 0)
	}
}

func (t *topK) hits(ix *Index) []Hit {
	out := make([]Hit, len(t.items))
	for n := len(t.items) - 1; n >= 0; n-- {
		c := heap.Pop(t).(candidate)
		out[n] = Hit{ID: ix.ids[c.i], Score: c.score, Meta: ix.meta[c.i]}
	}
	return out
}
