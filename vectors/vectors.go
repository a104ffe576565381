// Package vectors finds the nearest of many unit vectors to one by cosine similarity, over a compact in-memory copy.
//
// It is a package of its own because the search is one concern with its
// own trade-offs, apart from the tickets it serves: PostgreSQL without
// pgvector cannot rank 100,000 vectors fast (each row's real[] is
// unpacked), so the desk keeps a copy here, refreshed from the store, and
// asks it through an interface a pgvector query could take over.
//
// A search goes in two passes over float32 vectors laid out one after
// another, each split across the CPUs. The first ranks every vector by
// the Hamming distance between its signs and the query's (one bit a
// dimension: six words at 384 dimensions, so a million take about 7 ms
// on two cores) and asks the filter about the nearest first; the second
// scores exactly the nearest that the filter keeps, at least
// MinCandidates and a 64th of the index. The answer is exact whenever no
// more vectors than that pass the filter (every search of an index of up
// to MinCandidates, a filter that keeps fewer); above,
// the benchmark measures its recall against an exact scan. SearchCustomer
// skips both passes: it scores exactly the vectors of one customer, which
// the index lists apart, newest first, up to a number it is given. At 384
// dimensions a vector costs 1.5 KiB and 48 bytes of signs.
package vectors

import (
	"container/heap"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas/blas32"
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
	sigs []uint64  // len(ids) × words: bit d of a vector's signature is set when its coordinate d is not negative
	meta []Meta
	pos  map[string]int
	// byCustomer lists, by Meta.CustomerID, the positions of that
	// customer's vectors in the order of their Meta.Opened, for
	// SearchCustomer to score them alone, newest first. A vector opened
	// before the last of its list is appended all the same, and the list
	// marked unsorted, to be sorted when a search needs its order: a load
	// in any order then costs one sort, where an insertion in place would
	// move half the list each time.
	byCustomer map[string][]int
	unsorted   map[string]bool
}

// New returns an empty index of vectors of dims floats.
func New(dims int) *Index {
	return &Index{dims: dims, pos: map[string]int{}, byCustomer: map[string][]int{}, unsorted: map[string]bool{}}
}

// Retain takes out every vector whose id keep refuses, and returns how
// many it took out.
func (ix *Index) Retain(keep func(id string) bool) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []string
	for _, id := range ix.ids {
		if !keep(id) {
			out = append(out, id)
		}
	}
	for _, id := range out {
		ix.removeLocked(id)
	}
	return len(out)
}

// words is the length of a signature.
func (ix *Index) words() int { return (ix.dims + 63) / 64 }

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
	return cap(ix.vecs)*4 + cap(ix.sigs)*8
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
	w := ix.words()
	if i, ok := ix.pos[id]; ok {
		copy(ix.vecs[i*ix.dims:(i+1)*ix.dims], unit)
		signs(unit, ix.sigs[i*w:(i+1)*w])
		ix.setMetaLocked(i, meta)
		return
	}
	i := len(ix.ids)
	ix.pos[id] = i
	ix.ids = append(ix.ids, id)
	ix.vecs = append(ix.vecs, unit...)
	ix.sigs = slices.Grow(ix.sigs, w)[:len(ix.sigs)+w]
	signs(unit, ix.sigs[len(ix.sigs)-w:])
	ix.meta = append(ix.meta, meta)
	ix.listLocked(meta.CustomerID, i)
}

// SetMeta changes id's meta, if it is there.
func (ix *Index) SetMeta(id string, meta Meta) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if i, ok := ix.pos[id]; ok {
		ix.setMetaLocked(i, meta)
	}
}

// setMetaLocked changes the meta at position i: a new customer moves it
// to that customer's list, a new time opened leaves its list to be sorted.
func (ix *Index) setMetaLocked(i int, meta Meta) {
	was := ix.meta[i]
	ix.meta[i] = meta
	switch {
	case was.CustomerID != meta.CustomerID:
		ix.unlistLocked(was.CustomerID, i)
		ix.listLocked(meta.CustomerID, i)
	case !was.Opened.Equal(meta.Opened):
		ix.unsorted[meta.CustomerID] = true
	}
}

// listLocked appends position i, whose meta is set, to customer's list,
// marking the list unsorted when i was opened before the list's last:
// rarely, as tickets are embedded about in the order they were opened.
func (ix *Index) listLocked(customer string, i int) {
	list := append(ix.byCustomer[customer], i)
	if n := len(list); n > 1 && ix.meta[list[n-2]].Opened.After(ix.meta[i].Opened) {
		ix.unsorted[customer] = true
	}
	ix.byCustomer[customer] = list
}

// sortLocked sorts customer's list by Meta.Opened if it is marked
// unsorted; the caller holds the lock for writing.
func (ix *Index) sortLocked(customer string) {
	if !ix.unsorted[customer] {
		return
	}
	slices.SortStableFunc(ix.byCustomer[customer], func(a, b int) int { return ix.meta[a].Opened.Compare(ix.meta[b].Opened) })
	delete(ix.unsorted, customer)
}

// unlistLocked takes position i out of customer's list, keeping the order
// of the others.
func (ix *Index) unlistLocked(customer string, i int) {
	list := ix.byCustomer[customer]
	if at := slices.Index(list, i); at >= 0 {
		list = slices.Delete(list, at, at+1)
	}
	if len(list) == 0 {
		delete(ix.byCustomer, customer)
		delete(ix.unsorted, customer)
		return
	}
	ix.byCustomer[customer] = list
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
	last, w := len(ix.ids)-1, ix.words()
	ix.unlistLocked(ix.meta[i].CustomerID, i)
	if i != last { // the last one takes its place
		moved := ix.byCustomer[ix.meta[last].CustomerID]
		moved[slices.Index(moved, last)] = i
		ix.ids[i], ix.meta[i] = ix.ids[last], ix.meta[last]
		copy(ix.vecs[i*ix.dims:(i+1)*ix.dims], ix.vecs[last*ix.dims:])
		copy(ix.sigs[i*w:(i+1)*w], ix.sigs[last*w:])
		ix.pos[ix.ids[i]] = i
	}
	ix.ids, ix.meta, ix.vecs, ix.sigs = ix.ids[:last], ix.meta[:last], ix.vecs[:last*ix.dims], ix.sigs[:last*w]
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

// MinCandidates is the fewest vectors a search scores exactly: the nearest
// by their signs. An index holds more than 64 times as many before the
// share grows (a 64th of it).
const MinCandidates = 4096

// Search returns the k vectors nearest q (cosine), best first, among those
// keep takes (nil: all) and whose score is at least minScore; q need not
// be a unit vector.
func (ix *Index) Search(q []float32, k int, minScore float32, keep func(id string, m Meta) bool) []Hit {
	unit := Normalize(q, ix.dims)
	if unit == nil || k <= 0 {
		return nil
	}
	w := ix.words()
	qsig := make([]uint64, w)
	signs(unit, qsig)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := len(ix.ids)
	workers := max(1, min(runtime.GOMAXPROCS(0), n/2048+1))

	// First: every vector's distance to the query's signs, and how many
	// are at each distance.
	scratch := distances.Get().(*[]uint16)
	defer distances.Put(scratch)
	if cap(*scratch) < n {
		*scratch = make([]uint16, n)
	}
	dist := (*scratch)[:n]
	maxDist := min(w*64, dropped-1) // a vector of more than 65,534 dimensions ranks coarser
	atDist := countByDistance(workers, n, maxDist, func(part, lo, hi int, c []int) {
		for i := lo; i < hi; i++ {
			d := min(hamming(qsig, ix.sigs[i*w:(i+1)*w]), maxDist)
			dist[i] = uint16(d)
			c[d]++
		}
	})

	// Then the filter, nearest first, until enough are kept.
	want := max(MinCandidates, n/64)
	kept, done := atDist, maxDist // with no filter, every distance's vectors are kept
	if keep != nil {
		kept, done = ix.filterNearestFirst(workers, dist, atDist, want, keep)
	}
	// The nearest distance that takes in enough kept candidates; all of
	// them when fewer are kept.
	within, taken := done, 0
	for d := 0; d <= done; d++ {
		if taken += kept[d]; taken >= want {
			within = d
			break
		}
	}

	// Last, the candidates scored exactly.
	parts := make([]topK, workers)
	split(workers, n, func(part, lo, hi int) {
		top := topK{k: k}
		for i := lo; i < hi; i++ {
			if d := dist[i]; d == dropped || int(d) > within {
				continue
			}
			if s := dot(unit, ix.vecs[i*ix.dims:(i+1)*ix.dims]); s >= minScore {
				top.offer(i, s)
			}
		}
		parts[part] = top
	})
	all := topK{k: k}
	for _, p := range parts {
		for _, c := range p.items {
			all.offer(c.i, c.score)
		}
	}
	return all.hits(ix)
}

// SearchCustomer is Search among the vectors of one customer
// (Meta.CustomerID) opened at since or later (any, for the zero time),
// scored exactly: the newest (by Meta.Opened) that keep accepts, up to
// newest of them (all of them for 0 or less). It asks keep about no
// vector opened before since and scores no more than newest, whatever the
// size of the index or the customer's history, and finds the same as an
// exact scan of those.
func (ix *Index) SearchCustomer(q []float32, customerID string, k int, minScore float32, newest int, since time.Time, keep func(id string, m Meta) bool) []Hit {
	unit := Normalize(q, ix.dims)
	if unit == nil || k <= 0 {
		return nil
	}
	ix.mu.RLock()
	// The list is read newest first: sorted under the lock for writing if
	// it must be, and looked at again, should a writer have come between.
	for ix.unsorted[customerID] {
		ix.mu.RUnlock()
		ix.mu.Lock()
		ix.sortLocked(customerID)
		ix.mu.Unlock()
		ix.mu.RLock()
	}
	defer ix.mu.RUnlock()
	top := topK{k: k}
	list := ix.byCustomer[customerID]
	scored := 0
	for j := len(list) - 1; j >= 0 && (newest <= 0 || scored < newest); j-- {
		i := list[j]
		if ix.meta[i].Opened.Before(since) {
			break // and so are all before it
		}
		if keep != nil && !keep(ix.ids[i], ix.meta[i]) {
			continue
		}
		scored++
		if s := dot(unit, ix.vecs[i*ix.dims:(i+1)*ix.dims]); s >= minScore {
			top.offer(i, s)
		}
	}
	return top.hits(ix)
}

// filterNearestFirst asks keep about the vectors by their distance to the
// query's signs (dist, counted by distance in atDist), nearest first: over
// the vectors of a band of distances wide enough to make up what is
// missing (were they all kept) and twice the band before, until want are
// kept or none is left. A filter that keeps most vectors is asked about
// little more than want of them, one that keeps few about every vector,
// in a few bands. It marks the vectors left out dropped, and returns how
// many are kept at each distance up to done, the farthest it asked about.
func (ix *Index) filterNearestFirst(workers int, dist []uint16, atDist []int, want int, keep func(string, Meta) bool) (kept []int, done int) {
	maxDist := len(atDist) - 1
	kept, done = make([]int, maxDist+1), -1
	for keptSoFar, band := 0, 0; keptSoFar < want && done < maxDist; {
		from, to, in := done+1, done, 0
		for to < maxDist && in < max(want-keptSoFar, 2*band) {
			to++
			in += atDist[to]
		}
		inBand := countByDistance(workers, len(dist), maxDist, func(part, lo, hi int, c []int) {
			for i := lo; i < hi; i++ {
				switch d := int(dist[i]); {
				case d < from || d > to:
				case keep(ix.ids[i], ix.meta[i]):
					c[d]++
				default:
					dist[i] = dropped
				}
			}
		})
		for d := from; d <= to; d++ {
			kept[d] += inBand[d]
			keptSoFar += inBand[d]
		}
		done, band = to, in
	}
	return kept, done
}

// dropped marks, among a search's distances, a vector its filter left out.
const dropped = math.MaxUint16

// distances holds the first pass's scratch between searches (2 bytes a
// vector): a search of a million would otherwise allocate 2 MiB.
var distances = sync.Pool{New: func() any { return new([]uint16) }}

// countByDistance runs count over n items in parts, each adding to counts
// of its own by distance (0 to maxDist), and returns their sum.
func countByDistance(parts, n, maxDist int, count func(part, lo, hi int, c []int)) []int {
	each := make([][]int, parts)
	split(parts, n, func(part, lo, hi int) {
		each[part] = make([]int, maxDist+1)
		count(part, lo, hi, each[part])
	})
	for _, c := range each[1:] {
		for d, k := range c {
			each[0][d] += k
		}
	}
	return each[0]
}

// split runs f over n items in parts, one goroutine each when there are
// several.
func split(parts, n int, f func(part, lo, hi int)) {
	if parts == 1 {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { f(p, n*p/parts, n*(p+1)/parts) })
	}
	wg.Wait()
}

// signs sets bit d of out when unit[d] is not negative (its sign bit is
// clear), without a branch: the signs of an embedding are a coin toss,
// which a branch mispredicts half the time.
func signs(unit []float32, out []uint64) {
	for w := range out {
		var word uint64
		for i, x := range unit[w*64 : min(len(unit), (w+1)*64)] {
			word |= uint64(^math.Float32bits(x)>>31&1) << i
		}
		out[w] = word
	}
}

// hamming counts the bits in which two signatures differ.
func hamming(a, b []uint64) int {
	b = b[:len(a)]
	d := 0
	for i := range a {
		d += bits.OnesCount64(a[i] ^ b[i])
	}
	return d
}

// dot is the dot product of two vectors of the same length. It is the
// search's inner loop (MinCandidates of them at least), so it runs in
// gonum's assembly kernel, which multiplies four floats at once where Go
// compiles one at a time: 2.5 to 3 times as fast at 384 dimensions
// (BenchmarkDot).
func dot(a, b []float32) float32 {
	n := len(a)
	return blas32.Dot(blas32.Vector{N: n, Inc: 1, Data: a}, blas32.Vector{N: n, Inc: 1, Data: b[:n]})
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
