package vectors_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/internal/cputime"
	"github.com/helpdesk-dev/helpdesk/vectors"
)

// exact is the reference: every vector scored one by one, in float64.
func exact(vecs map[string][]float32, q []float32, k int, keep func(string) bool) []string {
	type scored struct {
		id string
		s  float64
	}
	var all []scored
	qq := norm(q)
	for id, v := range vecs {
		if keep != nil && !keep(id) {
			continue
		}
		var s float64
		for i := range v {
			s += float64(v[i]) * float64(q[i])
		}
		all = append(all, scored{id, s / (norm(v) * qq)})
	}
	sort.Slice(all, func(a, b int) bool { return all[a].s > all[b].s })
	var out []string
	for _, s := range all[:min(k, len(all))] {
		out = append(out, s.id)
	}
	return out
}

// norm is a vector's length, in float64.
func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// clustered makes n vectors around 50 centres, as tickets about the same
// few things are.
func clustered(rng *rand.Rand, n, dims int) map[string][]float32 {
	centres := make([][]float32, 50)
	for c := range centres {
		centres[c] = make([]float32, dims)
		for i := range dims {
			centres[c][i] = float32(rng.NormFloat64())
		}
	}
	out := make(map[string][]float32, n)
	for j := range n {
		c := centres[rng.IntN(len(centres))]
		v := make([]float32, dims)
		for i := range dims {
			v[i] = c[i] + float32(rng.NormFloat64()*0.8)
		}
		out[fmt.Sprintf("T-%06d", j)] = v
	}
	return out
}

func TestIndex(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := clustered(rng, 5000, 64)
	ix := vectors.New(64)
	for id, v := range vecs {
		ix.Put(id, v, vectors.Meta{Status: map[bool]string{true: "solved", false: "open"}[id[len(id)-1]%2 == 0]})
	}

	t.Run("ItFindsWhatAnExactScanFinds", func(t *testing.T) {
		t.Parallel()
		for range 20 {
			q := vecs[fmt.Sprintf("T-%06d", rng.IntN(5000))]
			solved := func(id string) bool { return id[len(id)-1]%2 == 0 }
			hits := ix.Search(q, 10, -1, func(_ string, m vectors.Meta) bool { return m.Status == "solved" })
			var got []string
			for _, h := range hits {
				got = append(got, h.ID)
			}
			if want := exact(vecs, q, 10, solved); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Fatalf("not best first: %v", hits)
				}
			}
		}
	})

	t.Run("RetainTakesOutWhatItRefusesAndKeepsTheRest", func(t *testing.T) {
		t.Parallel()
		ix := vectors.New(2)
		for id, v := range map[string][]float32{"a": {1, 0}, "b": {0, 1}, "c": {1, 1}, "d": {-1, 0}} {
			ix.Put(id, v, vectors.Meta{Team: id})
		}
		if n := ix.Retain(func(id string) bool { return id == "b" || id == "d" }); n != 2 || ix.Len() != 2 {
			t.Fatalf("took out %d, %d left; want 2 and 2", n, ix.Len())
		}
		for id, q := range map[string][]float32{"b": {0, 1}, "d": {-1, 0}} {
			if hits := ix.Search(q, 1, 0.99, nil); len(hits) != 1 || hits[0].ID != id || hits[0].Meta.Team != id {
				t.Errorf("nearest to %s's vector: %+v", id, hits)
			}
		}
		if hits := ix.Search([]float32{1, 0}, 1, 0.99, nil); len(hits) != 0 {
			t.Errorf("a vector taken out was found: %+v", hits)
		}
	})

	t.Run("ReplacedAndRemovedVectorsAreGone", func(t *testing.T) {
		t.Parallel()
		small := vectors.New(3)
		small.Put("a", []float32{1, 0, 0}, vectors.Meta{})
		small.Put("b", []float32{0, 1, 0}, vectors.Meta{})
		small.Put("c", []float32{0, 0, 1}, vectors.Meta{})
		small.Put("a", []float32{0, 0.9, 0.1}, vectors.Meta{Team: "billing"})
		small.Remove("b")
		hits := small.Search([]float32{0, 1, 0}, 5, 0.5, nil)
		if len(hits) != 1 || hits[0].ID != "a" || hits[0].Meta.Team != "billing" || small.Len() != 2 {
			t.Errorf("hits %+v of %d", hits, small.Len())
		}
		small.Put("c", []float32{1, 2}, vectors.Meta{}) // another length: taken out
		if small.Vector("c") != nil || small.Len() != 1 {
			t.Error("a vector of the wrong length stayed")
		}
	})
}

// TestSearchCustomer checks the per-customer search against an exact scan
// of that customer's vectors, whole and bounded to the newest, after the
// changes that move vectors in the index: new ones (not in the order they
// were opened), replaced ones, a customer or the time opened changed,
// removals (the last vector takes the removed one's place) and a Retain.
func TestSearchCustomer(t *testing.T) {
	t.Parallel()
	const n, dims = 2 * vectors.MinCandidates, 32
	rng := rand.New(rand.NewPCG(3, 4))
	vecs := clustered(rng, n, dims)
	customer, opened := map[string]string{}, map[string]time.Time{}
	epoch := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	seconds := rng.Perm(10 * n) // each vector opened at a second of its own
	openedAt := func() time.Time {
		at := epoch.Add(time.Duration(seconds[0]) * time.Second)
		seconds = seconds[1:]
		return at
	}
	meta := func(id string) vectors.Meta {
		return vectors.Meta{CustomerID: customer[id], Status: "open", Opened: opened[id]}
	}
	ix := vectors.New(dims)
	// check searches every customer's vectors, whole and bounded: each
	// phase below changes the index, and each check sorts the lists the
	// next phase then changes.
	check := func(phase string) {
		t.Helper()
		for c := range 41 { // C-0040 has no vector
			want := fmt.Sprintf("C-%04d", c)
			var theirs []string // the customer's, newest first
			for id := range vecs {
				if customer[id] == want {
					theirs = append(theirs, id)
				}
			}
			slices.SortFunc(theirs, func(a, b string) int { return opened[b].Compare(opened[a]) })
			// Since the time the third newest was opened: the three newest.
			var since time.Time
			if len(theirs) >= 3 {
				since = opened[theirs[2]]
			}
			for _, tc := range []struct {
				newest int
				since  time.Time
			}{{0, time.Time{}}, {1, time.Time{}}, {7, time.Time{}}, {len(theirs) / 2, time.Time{}}, {0, since}, {2, since}} {
				newest := tc.newest
				in := theirs
				if !tc.since.IsZero() {
					in = theirs[:3]
				}
				if newest > 0 {
					in = in[:min(newest, len(in))]
				}
				q := clustered(rng, 1, dims)["T-000000"]
				// It reads the customer's vectors only, up to the bound,
				// newest first, none opened before since: the filter is
				// asked about each of those once, and about no other.
				var asked []string
				ix.SearchCustomer(q, want, 5, -1, newest, tc.since, func(id string, m vectors.Meta) bool {
					if m.CustomerID != want {
						t.Fatalf("%s: %s's search asked about %s of %s", phase, want, id, m.CustomerID)
					}
					asked = append(asked, id)
					return true
				})
				if !slices.Equal(asked, in) {
					t.Fatalf("%s: %s's search of the newest %d since %v asked about %v; want %v", phase, want, newest, tc.since, asked, in)
				}
				var got []string
				for _, h := range ix.SearchCustomer(q, want, 5, -1, newest, tc.since, nil) {
					if h.Meta.CustomerID != want {
						t.Fatalf("%s: %s's search found %s of %s", phase, want, h.ID, h.Meta.CustomerID)
					}
					got = append(got, h.ID)
				}
				if exp := exact(vecs, q, 5, func(id string) bool { return slices.Contains(in, id) }); !slices.Equal(got, exp) {
					t.Fatalf("%s: %s, the newest %d since %v: got %v, want %v", phase, want, newest, tc.since, got, exp)
				}
			}
		}
	}
	for id := range vecs { // in no order
		customer[id], opened[id] = fmt.Sprintf("C-%04d", rng.IntN(40)), openedAt()
		ix.Put(id, vecs[id], meta(id))
	}
	check("put")
	for range 500 { // replaced: a new vector, and for some a new customer
		id := fmt.Sprintf("T-%06d", rng.IntN(n))
		vecs[id] = clustered(rng, 1, dims)["T-000000"]
		if rng.IntN(2) == 0 {
			customer[id] = fmt.Sprintf("C-%04d", rng.IntN(40))
		}
		ix.Put(id, vecs[id], meta(id))
	}
	check("replaced")
	for range 300 { // a customer changed without the vector
		id := fmt.Sprintf("T-%06d", rng.IntN(n))
		customer[id] = fmt.Sprintf("C-%04d", rng.IntN(40))
		ix.SetMeta(id, meta(id))
	}
	check("customer changed")
	for range 300 { // the time opened changed (a ticket's history rewritten)
		id := fmt.Sprintf("T-%06d", rng.IntN(n))
		opened[id] = openedAt()
		ix.SetMeta(id, meta(id))
	}
	check("time opened changed")
	for range 700 {
		id := fmt.Sprintf("T-%06d", rng.IntN(n))
		ix.Remove(id)
		delete(vecs, id)
	}
	check("removed")
	ix.Retain(func(id string) bool {
		if id[len(id)-1] == '3' {
			delete(vecs, id)
			return false
		}
		return true
	})
	check("retained")

	// A search that finds its customer's list out of order sorts it under
	// the lock for writing, while puts keep coming (run with -race).
	t.Run("SearchesAndPutsAtOnce", func(t *testing.T) {
		t.Parallel()
		shared := vectors.New(2)
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				for i := range 200 {
					at := epoch.Add(time.Duration((i*7919)%200) * time.Minute) // out of order
					shared.Put(fmt.Sprintf("T-%d-%d", w, i), []float32{1, float32(i)}, vectors.Meta{CustomerID: "C-1", Status: "open", Opened: at})
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				for range 100 {
					var last time.Time
					shared.SearchCustomer([]float32{1, 0}, "C-1", 3, -1, 50, time.Time{}, func(_ string, m vectors.Meta) bool {
						if !last.IsZero() && m.Opened.After(last) {
							t.Errorf("asked about one opened %v after one opened %v: not newest first", m.Opened, last)
						}
						last = m.Opened
						return true
					})
				}
			})
		}
		wg.Wait()
	})

	t.Run("TheBoundCountsWhatTheFilterKeeps", func(t *testing.T) {
		t.Parallel()
		small := vectors.New(2)
		for i, status := range []string{"open", "solved", "open", "solved", "open"} {
			small.Put(fmt.Sprint(i), []float32{1, float32(i) / 10}, vectors.Meta{CustomerID: "C-1", Status: status,
				Opened: epoch.Add(time.Duration(i) * time.Hour)})
		}
		var got []string
		for _, h := range small.SearchCustomer([]float32{1, 0}, "C-1", 5, 0, 2, time.Time{}, func(_ string, m vectors.Meta) bool { return m.Status == "open" }) {
			got = append(got, h.ID)
		}
		if !slices.Equal(got, []string{"2", "4"}) {
			t.Errorf("the two newest open: %v, want [2 4] (nearest first)", got)
		}
	})
	t.Run("TheFilterAndTheThresholdStillApply", func(t *testing.T) {
		t.Parallel()
		small := vectors.New(2)
		small.Put("a", []float32{1, 0}, vectors.Meta{CustomerID: "C-1", Status: "open"})
		small.Put("b", []float32{1, 0.1}, vectors.Meta{CustomerID: "C-1", Status: "solved"})
		small.Put("c", []float32{0, 1}, vectors.Meta{CustomerID: "C-1", Status: "open"})
		small.Put("d", []float32{1, 0}, vectors.Meta{CustomerID: "C-2", Status: "open"})
		hits := small.SearchCustomer([]float32{1, 0}, "C-1", 3, 0.5, 0, time.Time{}, func(_ string, m vectors.Meta) bool { return m.Status == "open" })
		if len(hits) != 1 || hits[0].ID != "a" {
			t.Errorf("hits %+v, want only a", hits)
		}
	})
}

// TestSearchAboveMinCandidates covers indexes larger than what a search
// scores exactly, where the vectors' signs choose the candidates.
func TestSearchAboveMinCandidates(t *testing.T) {
	t.Parallel()
	const n, dims = 3 * vectors.MinCandidates, 128
	build := func(seed uint64) (*vectors.Index, map[string][]float32) {
		vecs := clustered(rand.New(rand.NewPCG(seed, 9)), n, dims)
		ix := vectors.New(dims)
		for id, v := range vecs {
			ix.Put(id, v, vectors.Meta{})
		}
		return ix, vecs
	}

	t.Run("ItFindsNearlyAllAnExactScanFinds", func(t *testing.T) {
		t.Parallel()
		ix, vecs := build(5)
		// Without a filter, and with one that keeps nine in ten: the
		// filter is asked about the nearest first, band after band.
		for name, keep := range map[string]func(string) bool{
			"all":         nil,
			"nine in ten": func(id string) bool { return id[len(id)-1] != '7' },
		} {
			found, wanted := 0, 0
			for i := range 10 {
				q := vecs[fmt.Sprintf("T-%06d", i*997)]
				got := map[string]bool{}
				var filter func(string, vectors.Meta) bool
				if keep != nil {
					filter = func(id string, _ vectors.Meta) bool { return keep(id) }
				}
				for _, h := range ix.Search(q, 10, -1, filter) {
					got[h.ID] = true
				}
				for _, id := range exact(vecs, q, 10, keep) {
					wanted++
					if got[id] {
						found++
					}
				}
			}
			recall := float64(found) / float64(wanted)
			t.Logf("%s: recall@10 %.2f", name, recall)
			if recall < 0.95 {
				t.Errorf("%s: recall@10 %.2f of an exact scan, want at least 0.95", name, recall)
			}
		}
	})

	t.Run("AFilterThatKeepsFewIsAnsweredExactly", func(t *testing.T) {
		t.Parallel()
		ix, vecs := build(8)
		few := func(id string) bool { return strings.HasSuffix(id, "00") } // one in a hundred
		for i := range 10 {
			q := vecs[fmt.Sprintf("T-%06d", i*1231)]
			var got []string
			for _, h := range ix.Search(q, 10, -1, func(id string, _ vectors.Meta) bool { return few(id) }) {
				got = append(got, h.ID)
			}
			if want := exact(vecs, q, 10, few); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	})

	// A vector found only through its signature: the query itself, put
	// in by replacing another vector, or moved by a removal into the
	// removed vector's place.
	far := func(q []float32) []float32 {
		v := make([]float32, len(q))
		for i, x := range q {
			v[i] = -x
		}
		return v
	}
	t.Run("AReplacedVectorIsFoundByItsNewSigns", func(t *testing.T) {
		t.Parallel()
		ix, vecs := build(6)
		q := vecs["T-000001"]
		ix.Put("new", far(q), vectors.Meta{})
		ix.Put("new", q, vectors.Meta{Team: "billing"})
		hits := ix.Search(q, 2, -1, func(id string, _ vectors.Meta) bool { return id != "T-000001" })
		if len(hits) == 0 || hits[0].ID != "new" || hits[0].Score < 0.999 || hits[0].Meta.Team != "billing" {
			t.Errorf("hits %+v, want new first with score 1", hits)
		}
	})
	t.Run("AVectorMovedByARemovalKeepsItsSigns", func(t *testing.T) {
		t.Parallel()
		ix, vecs := build(7)
		q := vecs["T-000002"]
		ix.Put("last", q, vectors.Meta{})
		ix.Remove("T-000003") // the last vector takes its place
		ix.Remove("T-000002")
		hits := ix.Search(q, 1, -1, nil)
		if len(hits) != 1 || hits[0].ID != "last" || hits[0].Score < 0.999 || ix.Len() != n-1 {
			t.Errorf("hits %+v of %d, want last with score 1", hits, ix.Len())
		}
	})
}

// BenchmarkSimilar measures the lookup at 10,000 and 100,000 tickets of
// 384 floats beside an exact float64 scan of the same data, with its
// recall against that scan and the memory the vectors take.
func BenchmarkSimilar(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		benchmarkSimilar(b, n, 20)
	}
}

// BenchmarkSearchCustomer is a duplicate search of a customer who has
// 10,000 open tickets (a machine, or a flood from one address): every one
// of them scored, and the newest 200 (the desk's bound), reported as the
// bounded search's time ÷ the whole one's (of_all).
func BenchmarkSearchCustomer(b *testing.B) {
	const n = 10_000
	rng := rand.New(rand.NewPCG(5, 6))
	vecs := clustered(rng, n, 384)
	ix := vectors.New(384)
	epoch := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	for id, v := range vecs {
		ix.Put(id, v, vectors.Meta{CustomerID: "C-1", Status: "open", Opened: epoch.Add(time.Duration(i) * time.Second)})
		i++
	}
	q := clustered(rng, 1, 384)["T-000000"]
	open := func(_ string, m vectors.Meta) bool { return m.Status == "open" }
	var all float64
	for _, newest := range []int{0, 200} {
		b.Run(fmt.Sprintf("newest=%d", newest), func(b *testing.B) {
			for b.Loop() {
				ix.SearchCustomer(q, "C-1", 1, 0.5, newest, time.Time{}, open)
			}
			per := float64(b.Elapsed()) / float64(b.N)
			if newest == 0 {
				all = per
			} else if all > 0 {
				b.ReportMetric(per/all, "of_all")
			}
		})
	}
}

// BenchmarkSimilarAtAMillion is BenchmarkSimilar at a million tickets
// (make bench-growth): 1.5 GiB of vectors, and a minute for the exact
// scans its recall is measured against.
func BenchmarkSimilarAtAMillion(b *testing.B) {
	benchmarkSimilar(b, 1_000_000, 10)
}

// benchmarkSimilar searches an index of n clustered vectors for the ten
// nearest of one of them, and measures recall over exact float64 scans
// of the given number of them.
func benchmarkSimilar(b *testing.B, n, exactScans int) {
	rng := rand.New(rand.NewPCG(3, 4))
	vecs := clustered(rng, n, 384)
	ix := vectors.New(384)
	for id, v := range vecs {
		ix.Put(id, v, vectors.Meta{Status: "solved"})
	}
	ids := make([]string, 0, n)
	for id := range vecs {
		ids = append(ids, id)
	}
	b.Run(fmt.Sprintf("tickets=%d", n), func(b *testing.B) {
		var took []time.Duration
		cpuBefore := cputime.Process()
		for i := 0; b.Loop(); i++ {
			q := vecs[ids[i%len(ids)]]
			start := time.Now()
			ix.Search(q, 10, -1, func(_ string, m vectors.Meta) bool { return m.Status == "solved" })
			took = append(took, time.Since(start))
		}
		// The CPU a search costs, on every core it is split across: what
		// a process doing many of them pays.
		b.ReportMetric(float64((cputime.Process()-cpuBefore).Microseconds())/1000/float64(len(took)), "cpu_ms/search")
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95_ms")
		// The exact scan of the same data, and the recall against it.
		var exactTook []time.Duration
		found, wanted := 0, 0
		for i := range exactScans {
			q := vecs[ids[(i*7919)%len(ids)]]
			start := time.Now()
			want := exact(vecs, q, 10, nil)
			exactTook = append(exactTook, time.Since(start))
			got := map[string]bool{}
			for _, h := range ix.Search(q, 10, -1, nil) {
				got[h.ID] = true
			}
			for _, id := range want {
				wanted++
				if got[id] {
					found++
				}
			}
		}
		slices.Sort(exactTook)
		b.ReportMetric(float64(exactTook[len(exactTook)/2].Microseconds())/1000, "exact_p50_ms")
		b.ReportMetric(float64(found)/float64(wanted), "recall@10")
		b.ReportMetric(float64(ix.Bytes())/(1<<20), "MiB")
	})
}
